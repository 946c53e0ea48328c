package wire_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/wire"
)

const taskID = "550e8400-e29b-41d4-a716-446655440000"

// asrMessage returns a valid asr envelope as a map that a test case edits.
func asrMessage() map[string]any {
	return map[string]any{
		"task_id":    taskID,
		"step":       "asr",
		"attempt":    1,
		"trace_id":   "trace-123456",
		"created_at": "2024-01-01T12:00:00Z",
		"payload": map[string]any{
			"audio_key":  "audios/" + taskID + "/source.wav",
			"language":   "zh",
			"output_key": "asr/" + taskID + "/asr.json",
		},
	}
}

func encode(t *testing.T, m map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeMalformed(t *testing.T) {
	edit := func(f func(m, p map[string]any)) func(t *testing.T) []byte {
		return func(t *testing.T) []byte {
			m := asrMessage()
			f(m, m["payload"].(map[string]any))
			return encode(t, m)
		}
	}
	raw := func(s string) func(*testing.T) []byte { return func(*testing.T) []byte { return []byte(s) } }
	key := func(name, value string) func(*testing.T) []byte {
		return edit(func(_, p map[string]any) { p[name] = value })
	}
	tests := []struct {
		name string
		body func(t *testing.T) []byte
		want string
	}{
		{"empty body", raw(""), "not JSON"},
		{"not JSON", raw("hello"), "not JSON"},
		{"truncated JSON", raw(`{"task_id":`), "not JSON"},
		{"trailing garbage", raw(`{} {}`), "not JSON"},
		{"array", raw(`[]`), "must be an object, not an array"},
		{"null", raw(`null`), "must be an object, not null"},
		{"oversized", func(t *testing.T) []byte {
			m := asrMessage()
			m["padding"] = strings.Repeat("x", wire.MaxMessageBytes)
			return encode(t, m)
		}, "limit 1048576"},
		{"unknown step", edit(func(m, _ map[string]any) { m["step"] = "foo" }), `step: unknown step "foo"`},
		{"step of wrong type", edit(func(m, _ map[string]any) { m["step"] = 3 }), "step: must be a string, not a number"},
		{"bad UUID", edit(func(m, _ map[string]any) { m["task_id"] = "550e8400e29b41d4a716446655440000x" }), "task_id: not a UUID"},
		{"UUID as number", edit(func(m, _ map[string]any) { m["task_id"] = 42 }), "task_id: must be a string"},
		{"attempt 0", edit(func(m, _ map[string]any) { m["attempt"] = 0 }), "attempt: must be at least 1"},
		{"attempt negative", edit(func(m, _ map[string]any) { m["attempt"] = -1 }), "attempt: must be at least 1"},
		{"attempt huge", edit(func(m, _ map[string]any) { m["attempt"] = 1e12 }), "attempt: must be at most 1000"},
		{"attempt fraction", edit(func(m, _ map[string]any) { m["attempt"] = 1.5 }), "attempt: must be an integer, not a number"},
		{"attempt as string", edit(func(m, _ map[string]any) { m["attempt"] = "1" }), "attempt: must be an integer, not a string"},
		{"attempt written 1.0", func(t *testing.T) []byte {
			return bytes.Replace(encode(t, asrMessage()), []byte(`"attempt":1`), []byte(`"attempt":1.0`), 1)
		}, "attempt: must be an integer"},
		{"missing attempt", edit(func(m, _ map[string]any) { delete(m, "attempt") }), "attempt: required field is missing"},
		{"created_at not RFC 3339", edit(func(m, _ map[string]any) { m["created_at"] = "01/01/2024" }), "created_at: not an RFC 3339 date-time"},
		{"created_at leap second", edit(func(m, _ map[string]any) { m["created_at"] = "2016-12-31T23:59:60Z" }), "created_at: not an RFC 3339 date-time"},
		{"trace_id empty", edit(func(m, _ map[string]any) { m["trace_id"] = "" }), "trace_id: must not be empty"},
		{"trace_id with newline", edit(func(m, _ map[string]any) { m["trace_id"] = "a\nb" }), "trace_id: must be visible ASCII"},
		{"trace_id too long", edit(func(m, _ map[string]any) { m["trace_id"] = strings.Repeat("t", 129) }), "trace_id: must be at most 128 characters"},
		{"payload missing", edit(func(m, _ map[string]any) { delete(m, "payload") }), "payload: required field is missing"},
		{"payload null", edit(func(m, _ map[string]any) { m["payload"] = nil }), "payload: must be an object, not null"},
		{"payload field missing", edit(func(_, p map[string]any) { delete(p, "language") }), "payload.language: required field is missing"},
		{"payload field wrong type", edit(func(_, p map[string]any) { p["language"] = true }), "payload.language: must be a string, not a boolean"},
		{"payload unknown field", edit(func(_, p map[string]any) { p["Audio_Key"] = "x" }), "payload.Audio_Key: unknown field"},
		{"bad language", edit(func(_, p map[string]any) { p["language"] = "Chinese" }), `payload.language: must be a language code`},
		{"case-folded envelope field", edit(func(m, _ map[string]any) { m["Step"] = "tts" }), `Step: differs from "step" only in case`},
		{"Kelvin-sign folded field", edit(func(m, _ map[string]any) { m["tas\u212a_id"] = taskID }), `differs from "task_id" only in case`},
		{"key traversal", key("audio_key", "audios/"+taskID+"/../../secret.wav"), "payload.audio_key: must not contain '..'"},
		{"key traversal at start", key("audio_key", "../audios/"+taskID+"/a.wav"), "payload.audio_key: must not contain '..'"},
		{"key absolute", key("audio_key", "/audios/"+taskID+"/a.wav"), "payload.audio_key: must not start with '/'"},
		{"key backslash", key("audio_key", `audios\`+taskID+`\a.wav`), `payload.audio_key: must not contain '\'`},
		{"key NUL", key("audio_key", "audios/"+taskID+"/a\x00.wav"), "payload.audio_key: must not contain control characters"},
		{"key newline", key("audio_key", "audios/"+taskID+"/a\n.wav"), "payload.audio_key: must not contain control characters"},
		{"key C1 control", key("audio_key", "audios/"+taskID+"/a\u0085.wav"), "payload.audio_key: must not contain control characters"},
		{"key empty segment", key("audio_key", "audios//"+taskID+"/a.wav"), "payload.audio_key: must not contain empty segments"},
		{"key dot segment", key("audio_key", "audios/./"+taskID+"/a.wav"), "payload.audio_key: must not contain '.' segments"},
		{"key trailing slash", key("audio_key", "audios/"+taskID+"/"), "payload.audio_key: must not contain empty segments"},
		{"key empty", key("audio_key", ""), "payload.audio_key: must not be empty"},
		{"key too long", key("audio_key", "audios/"+taskID+"/"+strings.Repeat("a", 1024)), "payload.audio_key: must be at most 1024 characters"},
		{"key too long in bytes", key("audio_key", "audios/"+taskID+"/"+strings.Repeat("é", 500)), "payload.audio_key: must be at most 1024 bytes"},
		{"key wrong kind", key("audio_key", "videos/"+taskID+"/source.wav"), `payload.audio_key: must start with "audios/` + taskID + `/"`},
		{"key of another task", key("output_key", "asr/7c9e6679-7425-40de-944b-e07fc1f90ae7/asr.json"), `payload.output_key: must start with "asr/` + taskID + `/"`},
		{"key is the prefix only", key("output_key", "asr/"+taskID), `payload.output_key: must start with "asr/` + taskID + `/"`},
		{"payload task_id differs", func(t *testing.T) []byte {
			m := asrMessage()
			m["step"] = "mux_video"
			m["payload"] = map[string]any{
				"task_id":          "7c9e6679-7425-40de-944b-e07fc1f90ae7",
				"source_video_key": "videos/" + taskID + "/source.mp4",
				"tts_audio_key":    "tts/" + taskID + "/dub.wav",
				"output_video_key": "outputs/" + taskID + "/final.mp4",
			}
			return encode(t, m)
		}, "payload.task_id: 7c9e6679-7425-40de-944b-e07fc1f90ae7 is not the envelope's task_id"},
		{"translate without segments", func(t *testing.T) []byte {
			m := asrMessage()
			m["step"] = "translate"
			m["payload"] = map[string]any{"task_id": taskID, "segment_ids": []string{}, "source_language": "en", "target_language": "es"}
			return encode(t, m)
		}, "payload.segment_ids: must not be empty"},
		{"translate duplicate segments", func(t *testing.T) []byte {
			m := asrMessage()
			m["step"] = "translate"
			m["payload"] = map[string]any{"task_id": taskID, "segment_ids": []string{"seg-1", "seg-1"}, "source_language": "en", "target_language": "es"}
			return encode(t, m)
		}, "payload.segment_ids: items 0 and 1 are equal"},
		{"tts negative delay", func(t *testing.T) []byte {
			m := asrMessage()
			m["step"] = "tts"
			m["payload"] = map[string]any{"task_id": taskID, "retry_delay_sec": -1}
			return encode(t, m)
		}, "payload.retry_delay_sec: must be at least 0"},
		{"tts concurrency too high", func(t *testing.T) []byte {
			m := asrMessage()
			m["step"] = "tts"
			m["payload"] = map[string]any{"task_id": taskID, "max_concurrency": 1000}
			return encode(t, m)
		}, "payload.max_concurrency: must be at most 64"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env, err := wire.Decode(tc.body(t))
			if err == nil {
				t.Fatalf("accepted %+v", env)
			}
			var ie *wire.InvalidError
			if !errors.As(err, &ie) {
				t.Fatalf("got %T %v, want an *InvalidError", err, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

func TestDecodeAcceptsForwardCompatibleEnvelope(t *testing.T) {
	m := asrMessage()
	m["priority"] = 5 // a field a newer producer may add
	m["created_at"] = "2024-01-01T20:00:00.123456+08:00"
	env, err := wire.Decode(encode(t, m))
	if err != nil {
		t.Fatal(err)
	}
	if env.Step != wire.StepASR || env.Attempt != 1 || env.TaskID.String() != taskID || env.TraceID != "trace-123456" {
		t.Fatalf("decoded %+v", env)
	}
	if want := "2024-01-01T12:00:00.123456Z"; env.CreatedAt.UTC().Format("2006-01-02T15:04:05.999999Z07:00") != want {
		t.Fatalf("created_at %v, want %s", env.CreatedAt, want)
	}
	var p wire.ASR
	if err := env.UnmarshalPayload(&p); err != nil {
		t.Fatal(err)
	}
	if p.Language != "zh" || p.AudioKey != "audios/"+taskID+"/source.wav" {
		t.Fatalf("payload %+v", p)
	}
}

func TestDecodeReportsEveryProblem(t *testing.T) {
	m := asrMessage()
	m["attempt"] = 0
	m["task_id"] = "nope"
	_, err := wire.Decode(encode(t, m))
	var ie *wire.InvalidError
	if !errors.As(err, &ie) {
		t.Fatalf("got %v", err)
	}
	if ie.Field != "attempt" || ie.Reason != "must be at least 1" {
		t.Fatalf("first problem %q: %q, want attempt: must be at least 1", ie.Field, ie.Reason)
	}
	if len(ie.More) != 1 || ie.More[0] != "task_id: not a UUID" {
		t.Fatalf("more problems %q", ie.More)
	}
}

func TestStepsAndRoutingKeys(t *testing.T) {
	want := map[string]string{
		wire.StepExtractAudio:    "task.extract_audio",
		wire.StepASR:             "task.asr",
		wire.StepTranslate:       "task.translate",
		wire.StepTTS:             "task.tts",
		wire.StepMuxVideo:        "task.mux_video",
		wire.StepWaitingEnqueue:  "waiting.enqueue",
		wire.StepWaitingProcess:  "waiting.process",
		wire.StepWaitingCancel:   "waiting.cancel",
		wire.StepWaitingCapacity: "waiting.capacity",
		"foo":                    "",
		"":                       "",
	}
	for step, rk := range want {
		if got := wire.RoutingKey(step); got != rk {
			t.Errorf("RoutingKey(%q) = %q, want %q", step, got, rk)
		}
	}
	if len(wire.Steps()) != len(want)-2 {
		t.Errorf("Steps() = %v", wire.Steps())
	}
	for i, step := range wire.Pipeline {
		prev := ""
		if i > 0 && step != wire.StepTranslate {
			prev = wire.Pipeline[i-1]
		}
		if got := wire.Previous(step); got != prev {
			t.Errorf("Previous(%q) = %q, want %q", step, got, prev)
		}
	}
}
