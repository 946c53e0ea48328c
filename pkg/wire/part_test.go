package wire_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

// TestEnvelopePart: a translate message's part is named by its segment ids,
// a long name by a hash (the same name as before the naming moved into the
// contract: the names are stored in task_steps and step_parts); every other
// step has one part, "". An asr message names its chunk, or the merge.
func TestEnvelopePart(t *testing.T) {
	task := uuid.MustParse("00000000-0000-0000-0000-000000000001")
	translate := func(ids ...string) *wire.Envelope {
		env, err := wire.New(wire.StepTranslate, task, "trace", wire.Translate{TaskID: task, SegmentIDs: ids,
			SourceLanguage: "en", TargetLanguage: "es"})
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	var long []string
	for i := range 80 {
		long = append(long, wire.SegmentID(i))
	}
	asr := &wire.Envelope{Step: wire.StepASR, Payload: json.RawMessage(`{"audio_key": "a", "language": "en", "output_key": "o"}`)}
	for _, tc := range []struct {
		name string
		env  *wire.Envelope
		want string
	}{
		{"one segment", translate("seg-0"), "seg-0"},
		{"a batch", translate("seg-3", "seg-4", "seg-5"), "seg-3,seg-4,seg-5"},
		{"a long batch", translate(long...), "seg-0..seg-79#6e6c98946830c56c"},
		{"the whole audio (the seed's asr message)", asr, ""},
		{"an asr chunk", &wire.Envelope{Step: wire.StepASR, Payload: json.RawMessage(
			`{"audio_key": "a", "language": "en", "output_key": "o", "chunk": {"index": 12, "offset_ms": 1, "lead_ms": 0}}`)}, "chunk-00012"},
		{"the asr merge", &wire.Envelope{Step: wire.StepASR, Payload: json.RawMessage(
			`{"audio_key": "a", "language": "en", "output_key": "o", "merge": true}`)}, "merge"},
		{"a step without a payload type", &wire.Envelope{Step: "dispatch", Payload: json.RawMessage(`{"x":1}`)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.env.Part()
			if err != nil || got != tc.want {
				t.Errorf("Part() = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	bad := &wire.Envelope{Step: wire.StepTranslate, Payload: json.RawMessage(`{"segment_ids": "seg-0"}`)}
	if _, err := bad.Part(); err == nil || !strings.Contains(err.Error(), "read translate part") {
		t.Errorf("unreadable payload: %v, want an error naming the step", err)
	}
}

// TestTTSPartAndDependency: a tts message with segment ids is the part they
// name and waits for no step; one without is the whole task (its version's
// part) and waits for what its route says (translate).
func TestTTSPartAndDependency(t *testing.T) {
	task := uuid.MustParse("00000000-0000-0000-0000-000000000001")
	for _, c := range []struct {
		p           wire.TTS
		part, after string
	}{
		{wire.TTS{TaskID: task}, "", wire.StepTranslate},
		{wire.TTS{TaskID: task, Version: 3}, "v3", wire.StepTranslate},
		{wire.TTS{TaskID: task, SegmentIDs: []string{"seg-4", "seg-5"}}, "seg-4,seg-5", ""},
		{wire.TTS{TaskID: task, SegmentIDs: []string{"seg-4"}, Version: 2}, "v2/seg-4", ""},
	} {
		env, err := wire.New(wire.StepTTS, task, "trace", c.p)
		if err != nil {
			t.Fatal(err)
		}
		part, err := env.Part()
		if err != nil || part != c.part {
			t.Errorf("%+v: part %q (%v), want %q", c.p, part, err, c.part)
		}
		if got := env.After(wire.Previous(wire.StepTTS)); got != c.after {
			t.Errorf("%+v: waits for %q, want %q", c.p, got, c.after)
		}
	}
	// Other steps keep their route's dependency.
	env, err := wire.New(wire.StepMuxVideo, task, "trace", wire.MuxVideo{TaskID: task, SourceVideoKey: wire.DefaultKeys(task).SourceVideo,
		TTSAudioKey: wire.DefaultKeys(task).DubAudio, OutputVideoKey: wire.DefaultKeys(task).OutputVideo})
	if err != nil {
		t.Fatal(err)
	}
	if got := env.After(wire.StepTTS); got != wire.StepTTS {
		t.Errorf("mux_video waits for %q, want tts", got)
	}
}
