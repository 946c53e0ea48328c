package wire_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"path"
	"reflect"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/proto"
)

// example is one file of proto/examples.
type example struct {
	name string // file name without .json
	body []byte
}

func examples(t testing.TB) []example {
	t.Helper()
	names, err := fs.Glob(proto.Examples, "examples/*.json")
	if err != nil {
		t.Fatal(err)
	}
	var out []example
	for _, n := range names {
		b, err := fs.ReadFile(proto.Examples, n)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, example{strings.TrimSuffix(path.Base(n), ".json"), b})
	}
	if len(out) == 0 {
		t.Fatal("no examples in proto/examples")
	}
	return out
}

// messageKind tells which decoder an example is for, from its name.
func messageKind(name string) string {
	name = strings.TrimPrefix(name, "invalid_")
	for _, k := range []string{"dead_letter", "tts_compensation", "event"} {
		if strings.HasPrefix(name, k) {
			return k
		}
	}
	return "envelope"
}

// decodeAs decodes body with the decoder of kind and re-encodes the result.
func decodeAs(kind string, body []byte) (any, []byte, error) {
	var v interface{ Marshal() ([]byte, error) }
	var err error
	switch kind {
	case "dead_letter":
		v, err = wire.DecodeDeadLetter(body)
	case "tts_compensation":
		v, err = wire.DecodeCompensation(body)
	case "event":
		v, err = wire.DecodeEvent(body)
	default:
		v, err = wire.Decode(body)
	}
	if err != nil {
		return nil, nil, err
	}
	out, err := v.Marshal()
	return v, out, err
}

func TestExamplesValid(t *testing.T) {
	for _, ex := range examples(t) {
		if strings.HasPrefix(ex.name, "invalid_") {
			continue
		}
		t.Run(ex.name, func(t *testing.T) {
			v, out, err := decodeAs(messageKind(ex.name), ex.body)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			assertSameJSON(t, ex.body, out)
			env, ok := v.(*wire.Envelope)
			if !ok {
				return
			}
			// The payload also round-trips through its Go type.
			p := payloadFor(t, env.Step)
			if err := env.UnmarshalPayload(p); err != nil {
				t.Fatal(err)
			}
			pout, err := json.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			assertSameJSON(t, env.Payload, pout)
		})
	}
}

func TestExamplesInvalid(t *testing.T) {
	n := 0
	for _, ex := range examples(t) {
		if !strings.HasPrefix(ex.name, "invalid_") {
			continue
		}
		n++
		t.Run(ex.name, func(t *testing.T) {
			var doc struct {
				Reason string `json:"x_invalid_reason"`
			}
			if err := json.Unmarshal(ex.body, &doc); err != nil || doc.Reason == "" {
				t.Fatalf("an invalid example must say why in x_invalid_reason (%v)", err)
			}
			_, _, err := decodeAs(messageKind(ex.name), ex.body)
			var ie *wire.InvalidError
			if !errors.As(err, &ie) {
				t.Fatalf("decode: got %v, want an *InvalidError", err)
			}
			if !strings.Contains(err.Error(), doc.Reason) {
				t.Fatalf("error %q does not say %q", err, doc.Reason)
			}
		})
	}
	if n < 10 {
		t.Fatalf("only %d invalid examples", n)
	}
}

// TestExamplesCoverSteps checks that every dubbing step has its example message in proto/.
func TestExamplesCoverSteps(t *testing.T) {
	have := map[string]bool{}
	for _, ex := range examples(t) {
		have[ex.name] = true
	}
	for _, step := range wire.Pipeline {
		if !have[step] {
			t.Errorf("no example %s.json", step)
		}
	}
	for _, name := range []string{"dead_letter", "tts_compensation", "event_task_succeeded"} {
		if !have[name] {
			t.Errorf("no example %s.json", name)
		}
	}
}

func payloadFor(t *testing.T, step string) any {
	t.Helper()
	switch step {
	case wire.StepExtractAudio:
		return new(wire.ExtractAudio)
	case wire.StepASR:
		return new(wire.ASR)
	case wire.StepTranslate:
		return new(wire.Translate)
	case wire.StepTTS:
		return new(wire.TTS)
	case wire.StepMuxVideo:
		return new(wire.MuxVideo)
	}
	t.Fatalf("no payload type for step %q", step)
	return nil
}

func assertSameJSON(t *testing.T, want, got []byte) {
	t.Helper()
	var w, g any
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("want: %v", err)
	}
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got: %v", err)
	}
	if !reflect.DeepEqual(w, g) {
		t.Fatalf("JSON differs:\nwant %s\n got %s", want, got)
	}
}
