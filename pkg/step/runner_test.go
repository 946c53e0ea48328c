package step_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	amqp "github.com/rabbitmq/amqp091-go"
)

func route(h step.Handler) []step.Route {
	return []step.Route{{Step: wire.StepASR, Timeout: 30 * time.Second, Handler: h}}
}

func TestDuplicateDeliveryIsProcessedOnce(t *testing.T) {
	t.Parallel()
	h := setup(t)
	var calls callLog
	reg := prometheus.NewRegistry()
	_, stop := h.start(wire.QueueASR, route(effect(&calls)), withMetrics(reg))
	defer stop()
	env := asrEnvelope(t)
	h.publish(env)
	h.publish(env) // the same message again, as a redelivery or a double publish would
	// Both deliveries settled: one ran, the other was found a duplicate.
	testenv.EventuallyWithin(t, 20*time.Second, "one effect and one duplicate", func() bool {
		return counted(t, reg, wire.StepASR, "succeeded")+counted(t, reg, wire.StepASR, "duplicate") >= 2
	})
	stop()
	if n := h.effects(env.TaskID); n != 1 {
		t.Fatalf("effects = %d, want 1", n)
	}
	if n := calls.len(); n != 1 {
		t.Fatalf("handler calls = %d, want 1", n)
	}
	if n := h.stepRows(env.TaskID, "succeeded"); n != 1 {
		t.Fatalf("succeeded rows = %d, want 1", n)
	}
}

func TestTransientErrorIsRetriedWithBackoffThenDeadLettered(t *testing.T) {
	t.Parallel()
	var calls callLog
	h, env := serveASR(t, route(recorded(&calls, func(*step.Message) error {
		return fmt.Errorf("call asr engine: %w", errFlaky)
	})))
	h.publish(env)
	dl := h.deadLetter(40 * time.Second)
	got := calls.snapshot()
	if len(got) != 4 {
		t.Fatalf("handler calls = %d, want 4 (first try and 3 retries)", len(got))
	}
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		gap := got[i+1].at.Sub(got[i].at)
		if gap < want*9/10 || gap > want*3+2*time.Second {
			t.Errorf("retry %d came after %s, want about %s", i+1, gap.Round(10*time.Millisecond), want)
		}
		if got[i+1].attempt != i+2 {
			t.Errorf("retry %d has attempt %d, want %d", i+1, got[i+1].attempt, i+2)
		}
	}
	if dl.Attempt != 4 || dl.Step != wire.StepASR || dl.ErrorClass != "transient" {
		t.Errorf("dead letter = attempt %d step %q class %q, want 4 asr transient", dl.Attempt, dl.Step, dl.ErrorClass)
	}
	if !strings.Contains(dl.FailureReason, "engine unavailable") {
		t.Errorf("failure_reason %q does not name the cause", dl.FailureReason)
	}
	orig, err := dl.OriginalBody()
	if err != nil {
		t.Fatalf("original message: %v", err)
	}
	oenv, err := wire.Decode(orig)
	if err != nil || oenv.TaskID != env.TaskID {
		t.Fatalf("original message does not decode to the task's envelope: %v", err)
	}
	if n := h.stepRows(env.TaskID, "failed"); n != 4 {
		t.Errorf("failed attempts recorded = %d, want 4", n)
	}
}

func TestPermanentErrorIsDeadLetteredAtOnce(t *testing.T) {
	t.Parallel()
	var calls callLog
	h, env := serveASR(t, route(recorded(&calls, func(*step.Message) error {
		return fault.Permanent(fmt.Errorf("probe audio: no audio stream in %s", "audios/x/source.wav"))
	})))
	start := time.Now()
	h.publish(env)
	dl := h.deadLetter(20 * time.Second)
	if dl.ErrorClass != "permanent" || dl.Attempt != 1 || !strings.Contains(dl.FailureReason, "no audio stream") {
		t.Errorf("dead letter = %+v", dl)
	}
	if calls.len() != 1 {
		t.Errorf("handler calls = %d, want 1", calls.len())
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("dead-lettering took %s: it should not wait for retries", time.Since(start))
	}
}

func TestPanicIsAFailureNotACrash(t *testing.T) {
	t.Parallel()
	var calls callLog
	var n atomic.Int32
	h, env := serveASR(t, route(firstRuns(1, &n, &calls, func(context.Context, *step.Message) error {
		panic("nil map write")
	})))
	h.publish(env)
	testenv.EventuallyWithin(t, 20*time.Second, "the retry to succeed", func() bool { return h.effects(env.TaskID) == 1 })
	var errText string
	if err := h.db.Pool.QueryRow(context.Background(),
		`SELECT error FROM task_steps WHERE task_id = $1 AND attempt = 1`, env.TaskID).Scan(&errText); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errText, "panic") {
		t.Errorf("attempt 1 error = %q, want the panic recorded", errText)
	}
}

func TestMalformedMessagesAreDeadLetteredAndTheWorkerKeepsServing(t *testing.T) {
	t.Parallel()
	h := setup(t)
	var calls callLog
	h.run(wire.QueueASR, route(effect(&calls)))
	good := asrEnvelope(t)
	valid, _ := json.Marshal(good)
	cases := []struct {
		name, body, reason string
	}{
		{"not json", `{"task_id": `, "JSON"},
		{"wrong types", strings.Replace(string(valid), `"attempt":1`, `"attempt":"one"`, 1), "attempt"},
		{"unknown step", strings.Replace(string(valid), `"step":"asr"`, `"step":"karaoke"`, 1), "karaoke"},
		{"bad uuid", strings.Replace(string(valid), good.TaskID.String(), "not-a-uuid", 1), "task_id"},
		{"oversized", `{"task_id":"` + uuid.NewString() + `","pad":"` + strings.Repeat("x", 2<<20) + `"}`, "bytes"},
		{"hostile key", strings.Replace(string(valid), "audios/"+good.TaskID.String()+"/source.wav", "audios/../../etc/passwd", 1), ".."},
	}
	for _, c := range cases {
		h.publishRaw(wire.QueueASR, []byte(c.body))
		dl := h.deadLetter(20 * time.Second)
		if dl.ErrorClass != "invalid" || !strings.Contains(strings.ToLower(dl.FailureReason), strings.ToLower(c.reason)) {
			t.Errorf("%s: dead letter class %q reason %q, want invalid mentioning %q", c.name, dl.ErrorClass, dl.FailureReason, c.reason)
		}
		// Unreadable or not: the dead letter names the queue it was
		// consumed from and that queue's step.
		if dl.Step != wire.StepASR || dl.Queue != wire.QueueASR {
			t.Errorf("%s: dead letter step %q queue %q, want %s from %s", c.name, dl.Step, dl.Queue, wire.StepASR, wire.QueueASR)
		}
	}
	h.publish(good)
	testenv.EventuallyWithin(t, 20*time.Second, "the valid message after the bad ones", func() bool { return h.effects(good.TaskID) == 1 })
	if calls.len() != 1 {
		t.Errorf("handler calls = %d, want 1 (bad messages never reach the handler)", calls.len())
	}
}

func TestEarlyMessageWaitsForItsPredecessor(t *testing.T) {
	t.Parallel()
	h := setup(t)
	var calls callLog
	reg := prometheus.NewRegistry()
	h.run(wire.QueueASR, []step.Route{{Step: wire.StepASR, After: wire.StepExtractAudio, Timeout: 30 * time.Second, Handler: effect(&calls)}},
		withMetrics(reg))
	env := asrEnvelope(t)
	h.publish(env)
	// The runner has seen the message at least once and let it wait.
	testenv.EventuallyWithin(t, 20*time.Second, "the message to be told to wait", func() bool { return counted(t, reg, wire.StepASR, "waiting") >= 1 })
	if n := h.effects(env.TaskID); n != 0 {
		t.Fatalf("asr ran before extract_audio succeeded (effects %d)", n)
	}
	if _, err := h.db.Pool.Exec(context.Background(), `INSERT INTO task_steps (task_id, step, attempt, status)
		VALUES ($1, 'extract_audio', 1, 'succeeded')`, env.TaskID); err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyWithin(t, 30*time.Second, "asr to run once extract_audio succeeded", func() bool { return h.effects(env.TaskID) == 1 })
}

func TestOutboxSweepPublishesWhatACrashLeftBehind(t *testing.T) {
	t.Parallel()
	h := setup(t)
	// A crash between the commit and the publish leaves the message in the
	// outbox: put one there as a dead worker would have, and let a live
	// runner's sweep find it.
	env := asrEnvelope(t)
	next, err := env.Next(wire.StepTranslate, wire.Translate{TaskID: env.TaskID, SegmentIDs: []string{"seg-0"},
		SourceLanguage: "en", TargetLanguage: "es", BatchSize: 20})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(next)
	if _, err := h.db.Pool.Exec(context.Background(), `INSERT INTO outbox (message_id, exchange, routing_key, body, created_at)
		VALUES ($1, $2, $3, $4, now() - interval '1 minute')`, uuid.New(), wire.Exchange, wire.QueueTranslate, body); err != nil {
		t.Fatal(err)
	}
	var calls callLog
	h.run(wire.QueueASR, route(effect(&calls)))
	got, err := wire.Decode(h.next(wire.QueueTranslate, 20*time.Second))
	if err != nil || got.TaskID != env.TaskID || got.Step != wire.StepTranslate {
		t.Fatalf("swept message = %+v, %v", got, err)
	}
	testenv.EventuallyWithin(t, 10*time.Second, "the outbox to be empty", func() bool {
		var n int
		_ = h.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox`).Scan(&n)
		return n == 0
	})
}

// failingPublisher loses every publish of one routing key, as a crash right
// after the commit would, until healed.
type failingPublisher struct {
	step.Publisher
	key    string
	broken atomic.Bool
}

func (p *failingPublisher) Publish(ctx context.Context, exchange, key string, msg amqp.Publishing) error {
	if key == p.key && p.broken.Load() {
		return fmt.Errorf("publish %s: connection reset by peer", key)
	}
	return p.Publisher.Publish(ctx, exchange, key, msg)
}

func TestPublishFailureAfterCommitLosesNothing(t *testing.T) {
	t.Parallel()
	h := setup(t)
	fp := &failingPublisher{Publisher: h.pub, key: wire.QueueTranslate}
	fp.broken.Store(true)
	var calls callLog
	_, stop := h.start(wire.QueueASR, route(step.HandlerFunc(func(ctx context.Context, msg *step.Message) error {
		calls.add(msg)
		return msg.Emit(wire.StepTranslate, wire.Translate{TaskID: msg.Envelope.TaskID, SegmentIDs: []string{"seg-0"},
			SourceLanguage: "en", TargetLanguage: "es", BatchSize: 20})
	})), func(c *step.Config) { c.Publisher = fp })
	defer stop()
	env := asrEnvelope(t)
	h.publish(env)
	testenv.EventuallyWithin(t, 20*time.Second, "asr to commit", func() bool {
		var n int
		_ = h.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox`).Scan(&n)
		return n == 1
	})
	fp.broken.Store(false)
	got, err := wire.Decode(h.next(wire.QueueTranslate, 20*time.Second))
	if err != nil || got.TaskID != env.TaskID {
		t.Fatalf("translate message = %+v, %v", got, err)
	}
	// The sweep published the row and deleted it; with the runner stopped
	// (every delivery settled, the sweep ended) no copy can follow.
	testenv.EventuallyWithin(t, 20*time.Second, "the outbox to be empty", func() bool { return h.outboxRows() == 0 })
	stop()
	if n := h.ready(wire.QueueTranslate); n != 0 {
		t.Errorf("%d extra translate messages", n)
	}
	if calls.len() != 1 {
		t.Errorf("asr handler calls = %d, want 1 (the redelivered input is a duplicate)", calls.len())
	}
}

func TestFanInWithConcurrentFinishersTriggersNextStepOnce(t *testing.T) {
	t.Parallel()
	h := setup(t)
	const parts = 8
	var arrived sync.WaitGroup
	arrived.Add(parts)
	release := make(chan struct{})
	translate := step.HandlerFunc(func(ctx context.Context, msg *step.Message) error {
		arrived.Done()
		<-release // every part finishes at the same moment
		return msg.EmitWhenStepDone(wire.StepTTS, wire.TTS{TaskID: msg.Envelope.TaskID, BatchSize: 20,
			MaxConcurrency: 4, SpeakerID: "default"})
	})
	routes := []step.Route{{Step: wire.StepTranslate, Timeout: 30 * time.Second, Handler: translate}}
	// Two runners, as two worker processes would be.
	_, stop1 := h.start(wire.QueueTranslate, routes)
	defer stop1()
	_, stop2 := h.start(wire.QueueTranslate, routes)
	defer stop2()

	// The asr step fans out: one translate message per batch, each a part.
	task := uuid.New()
	asr, err := wire.New(wire.StepASR, task, "", wire.ASR{AudioKey: wire.DefaultKeys(task).SourceAudio, Language: "en", OutputKey: wire.DefaultKeys(task).ASR})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []*wire.Envelope
	for i := range parts {
		env, err := asr.Next(wire.StepTranslate, wire.Translate{TaskID: task, SegmentIDs: []string{wire.SegmentID(2 * i), wire.SegmentID(2*i + 1)},
			SourceLanguage: "en", TargetLanguage: "es", BatchSize: 2})
		if err != nil {
			t.Fatal(err)
		}
		part, _ := step.PartOf(env)
		if _, err := h.db.Pool.Exec(context.Background(), `INSERT INTO step_parts (task_id, step, part) VALUES ($1, 'translate', $2)`, task, part); err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, env)
	}
	for _, env := range msgs {
		h.publish(env)
	}
	done := make(chan struct{})
	go func() { arrived.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("not all parts started")
	}
	close(release)
	got, err := wire.Decode(h.next(wire.QueueTTS, 20*time.Second))
	if err != nil || got.TaskID != task || got.Step != wire.StepTTS {
		t.Fatalf("tts message = %+v, %v", got, err)
	}
	var succeeded int
	testenv.EventuallyWithin(t, 20*time.Second, "every part to succeed and the outbox to be empty", func() bool {
		if err := h.db.Pool.QueryRow(context.Background(),
			`SELECT count(*) FROM task_steps WHERE task_id = $1 AND step = 'translate' AND status = 'succeeded'`, task).Scan(&succeeded); err != nil {
			t.Fatal(err)
		}
		return succeeded == parts && h.outboxRows() == 0
	})
	// Both runners stopped: every delivery is settled, no copy can follow.
	stop1()
	stop2()
	if n := h.ready(wire.QueueTTS); n != 0 {
		t.Fatalf("%d extra tts messages: fan-in must trigger the next step exactly once", n)
	}
	if succeeded != parts {
		t.Fatalf("succeeded parts = %d, want %d", succeeded, parts)
	}
}
