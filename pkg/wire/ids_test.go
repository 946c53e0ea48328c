package wire_test

import (
	"testing"

	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

func TestEveryMessageHasAStableID(t *testing.T) {
	id := uuid.New()
	keys := wire.DefaultKeys(id)
	env, err := wire.New(wire.StepASR, id, "", wire.ASR{AudioKey: keys.SourceAudio, Language: "en", OutputKey: keys.ASR})
	if err != nil {
		t.Fatal(err)
	}
	if env.MessageID == uuid.Nil {
		t.Fatal("New gave no message id")
	}
	body, _ := env.Marshal()
	back, err := wire.Decode(body)
	if err != nil || back.MessageID != env.MessageID {
		t.Fatalf("decoded message id %v (%v), want %v", back.MessageID, err, env.MessageID)
	}
	if got, ok := wire.MessageID(body); !ok || got != env.MessageID {
		t.Errorf("MessageID(envelope) = %v %v", got, ok)
	}
	if r := env.Retry(); r.MessageID == env.MessageID || r.MessageID == uuid.Nil {
		t.Errorf("a retry is a new message: id %v, first %v", r.MessageID, env.MessageID)
	}

	ev := &wire.Event{Event: wire.EventTaskSucceeded, TaskID: id, Status: "done"}
	first, err := ev.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	again, _ := ev.Marshal()
	if ev.EventID == uuid.Nil || string(first) != string(again) {
		t.Fatalf("event id %v; marshals differ:\n%s\n%s", ev.EventID, first, again)
	}
	if got, ok := wire.MessageID(first); !ok || got != ev.EventID {
		t.Errorf("MessageID(event) = %v %v, want %v", got, ok, ev.EventID)
	}
	decoded, err := wire.DecodeEvent(first)
	if err != nil || decoded.EventID != ev.EventID {
		t.Errorf("decoded event id %v (%v)", decoded.EventID, err)
	}
	if _, ok := wire.MessageID([]byte(`{"task_id":"x"}`)); ok {
		t.Error("a body without an id has one")
	}
}

func TestCleanText(t *testing.T) {
	for in, want := range map[string]string{
		"plain":           "plain",
		"nul\x00here":     "nul\uFFFDhere",
		"bad\xff\xfeutf8": "bad\uFFFDutf8",
		"ok ünïcode":      "ok ünïcode",
		"\x00":            "\uFFFD",
		"trunc\xc3":       "trunc\uFFFD",
	} {
		if got := wire.CleanText(in); got != want {
			t.Errorf("CleanText(%q) = %q, want %q", in, got, want)
		}
	}
}
