package main

import (
	"context"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/wire"
	amqp "github.com/rabbitmq/amqp091-go"
)

// A dead letter of one part of a fanned-out step records which part it was.
func TestDeadLetterRecordsItsPart(t *testing.T) {
	t.Parallel()
	s := setup(t)
	taskID := newTask(t, s.db.Pool)
	env, err := wire.New(wire.StepTranslate, taskID, "trace-rec", wire.Translate{TaskID: taskID,
		SegmentIDs: []string{"seg-3", "seg-4"}, SourceLanguage: "en", TargetLanguage: "es", BatchSize: 20})
	if err != nil {
		t.Fatal(err)
	}
	body, err := env.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	part, err := step.PartOf(env)
	if err != nil || part == "" {
		t.Fatalf("part of a translate batch: %q, %v", part, err)
	}
	dl, err := wire.NewDeadLetter(body, env, wire.ClassPermanent, "apertium: no such mode", time.Now()).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	s.publish(t, "", wire.QueueDLQ, amqp.Publishing{MessageId: "dl-part", ContentType: "application/json", Body: dl})
	s.waitDeadLetters(t, 1)
	var got string
	if err := s.db.Pool.QueryRow(context.Background(), `SELECT part FROM dead_letters WHERE message_id = 'dl-part'`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != part {
		t.Errorf("recorded part %q, want %q", got, part)
	}
}
