package wire_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

func TestNewNextRetry(t *testing.T) {
	id := uuid.MustParse(taskID)
	keys := wire.DefaultKeys(id)
	first, err := wire.New(wire.StepExtractAudio, id, "trace-1", wire.ExtractAudio{
		SourceVideoKey: keys.SourceVideo, OutputAudioKey: keys.SourceAudio, SourceLanguage: "en",
	})
	if err != nil {
		t.Fatal(err)
	}
	if first.Attempt != 1 || first.TraceID != "trace-1" || first.CreatedAt.IsZero() || first.CreatedAt.Location() != time.UTC {
		t.Fatalf("New: %+v", first)
	}
	if first.RoutingKey() != "task.extract_audio" {
		t.Fatalf("routing key %q", first.RoutingKey())
	}

	// What New builds, Decode accepts unchanged.
	body, err := first.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := wire.Decode(body)
	if err != nil {
		t.Fatal(err)
	}
	assertSameEnvelope(t, first, back)

	next, err := back.Next(wire.StepASR, wire.ASR{AudioKey: keys.SourceAudio, Language: "en", OutputKey: keys.ASR})
	if err != nil {
		t.Fatal(err)
	}
	if next.TaskID != id || next.TraceID != "trace-1" || next.Attempt != 1 || next.Step != wire.StepASR {
		t.Fatalf("Next: %+v", next)
	}

	retry := next.Retry()
	if retry.Attempt != 2 || retry.Step != next.Step || retry.TraceID != next.TraceID || !bytes.Equal(retry.Payload, next.Payload) {
		t.Fatalf("Retry: %+v", retry)
	}
	if next.Attempt != 1 {
		t.Fatal("Retry changed its receiver")
	}
}

func TestNewRejectsWhatDecodeWould(t *testing.T) {
	id := uuid.MustParse(taskID)
	tests := []struct {
		name    string
		step    string
		payload any
		want    string
	}{
		{"unknown step", "foo", nil, `unknown step "foo"`},
		{"missing fields", wire.StepASR, wire.ASR{Language: "en"}, "payload.audio_key: must not be empty"},
		{"hostile key", wire.StepASR, wire.ASR{AudioKey: "audios/" + taskID + "/../../x", Language: "en", OutputKey: "asr/" + taskID + "/a.json"}, "payload.audio_key: must not contain '..'"},
		{"other task", wire.StepTTS, wire.TTS{TaskID: uuid.New()}, "payload.task_id:"},
		{"payload not an object", wire.StepTTS, []int{1}, "payload: must be an object"},
		{"payload not encodable", wire.StepTTS, func() {}, "encode tts payload"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env, err := wire.New(tc.step, id, "", tc.payload)
			if err == nil {
				t.Fatalf("built %+v", env)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

func TestNewFillsTraceID(t *testing.T) {
	env, err := wire.New(wire.StepWaitingProcess, uuid.New(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if env.TraceID == "" || string(env.Payload) != "{}" || env.RoutingKey() != "waiting.process" {
		t.Fatalf("New: %+v", env)
	}
}

func TestTTSOptionalZeroes(t *testing.T) {
	zero, delay := 0, 0.0
	id := uuid.MustParse(taskID)
	env, err := wire.New(wire.StepTTS, id, "t", wire.TTS{TaskID: id, MaxRetries: &zero, RetryDelaySec: &delay})
	if err != nil {
		t.Fatal(err)
	}
	var p wire.TTS
	if err := env.UnmarshalPayload(&p); err != nil {
		t.Fatal(err)
	}
	if p.MaxRetries == nil || *p.MaxRetries != 0 || p.RetryDelaySec == nil || *p.RetryDelaySec != 0 || p.BatchSize != 0 {
		t.Fatalf("explicit zeroes lost: %s", env.Payload)
	}
}

func TestDeadLetter(t *testing.T) {
	id := uuid.MustParse(taskID)
	env, err := wire.New(wire.StepASR, id, "trace-9", wire.ASR{AudioKey: "audios/" + taskID + "/a.wav", Language: "en", OutputKey: "asr/" + taskID + "/a.json"})
	if err != nil {
		t.Fatal(err)
	}
	good, _ := env.Marshal()
	at := time.Date(2024, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		body      []byte
		env       *wire.Envelope
		encoding  string
		truncated bool
	}{
		{"decoded message", good, env, "", false},
		{"not JSON", []byte("\xff\x00not json"), nil, "base64", false},
		{"oversized", append(bytes.Repeat([]byte(" "), wire.MaxMessageBytes), good...), nil, "base64", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := wire.NewDeadLetter(tc.body, tc.env, wire.ClassInvalid, strings.Repeat("é", 3000), at)
			b, err := d.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			back, err := wire.DecodeDeadLetter(b)
			if err != nil {
				t.Fatal(err)
			}
			if back.OriginalEncoding != tc.encoding || back.OriginalTruncated != tc.truncated || !back.FailedAt.Equal(at) {
				t.Fatalf("dead letter %+v", back)
			}
			orig, err := back.OriginalBody()
			if err != nil {
				t.Fatal(err)
			}
			want := tc.body
			if tc.truncated {
				want = want[:wire.MaxMessageBytes]
			}
			if !bytes.Equal(orig, want) {
				t.Fatalf("original body differs: %d bytes, want %d", len(orig), len(want))
			}
			if tc.env != nil && (back.Step != wire.StepASR || back.Attempt != 1 || back.TaskID != id || back.TraceID != "trace-9") {
				t.Fatalf("dead letter lost the envelope's details: %+v", back)
			}
			if len(back.FailureReason) > 4096 {
				t.Fatalf("failure reason of %d bytes", len(back.FailureReason))
			}
		})
	}
}

func TestCompensationAndEvent(t *testing.T) {
	id := uuid.MustParse(taskID)
	c := wire.NewCompensation(id, 3, errors.New("API timeout"), "trace-1", time.Now())
	b, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := wire.DecodeCompensation(b)
	if err != nil {
		t.Fatal(err)
	}
	if back.RoutingKey != "task.tts" || back.SegmentIdx != 3 || back.Error != "API timeout" || back.TaskID != id {
		t.Fatalf("compensation %+v", back)
	}

	ev := &wire.Event{Event: wire.EventTaskSucceeded, TaskID: id, Status: "done",
		OutputVideoKey: wire.DefaultKeys(id).OutputVideo, OccurredAt: time.Now().UTC(), Data: json.RawMessage(`{"segments":3}`)}
	if ev.RoutingKey() != "event.task.succeeded" {
		t.Fatalf("routing key %q", ev.RoutingKey())
	}
	b, err = ev.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wire.DecodeEvent(b); err != nil {
		t.Fatal(err)
	}
	// A waiting event carries no task.
	b, _ = (&wire.Event{Event: wire.EventWaitingAssigned, Status: "assigned", OccurredAt: time.Now()}).Marshal()
	if bytes.Contains(b, []byte("task_id")) {
		t.Fatalf("zero task_id encoded: %s", b)
	}
	if _, err := wire.DecodeEvent(b); err != nil {
		t.Fatal(err)
	}
}

func assertSameEnvelope(t testing.TB, want, got *wire.Envelope) {
	t.Helper()
	var wp, gp bytes.Buffer
	if err := json.Compact(&wp, want.Payload); err != nil {
		t.Fatal(err)
	}
	if err := json.Compact(&gp, got.Payload); err != nil {
		t.Fatal(err)
	}
	if want.TaskID != got.TaskID || want.Step != got.Step || want.Attempt != got.Attempt ||
		want.TraceID != got.TraceID || !want.CreatedAt.Equal(got.CreatedAt) || !bytes.Equal(wp.Bytes(), gp.Bytes()) {
		t.Fatalf("envelope changed:\nwant %+v %s\n got %+v %s", want, wp.Bytes(), got, gp.Bytes())
	}
}
