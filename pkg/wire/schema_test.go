package wire

import (
	"slices"
	"testing"
)

// TestSchemaStepsMatchGo keeps the envelope's step enum and Steps in step.
func TestSchemaStepsMatchGo(t *testing.T) {
	reg, err := schemas()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(reg.steps, Steps()) {
		t.Fatalf("envelope.schema.json steps %v, Go Steps() %v", reg.steps, Steps())
	}
	for _, step := range reg.steps {
		if reg.byName[step] == nil {
			t.Errorf("no compiled payload schema for step %s", step)
		}
	}
}

// TestKeyPatternMatchesGo checks that the objectKey pattern of the schema
// and keyProblem agree on a set of tricky keys.
func TestKeyPatternMatchesGo(t *testing.T) {
	reg, err := schemas()
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{
		"a", "a/b", "a.b/c.d", ".a/b.", "a/.b", "a b/c", "é/ü", "a..b", "..", ".", "a/./b", "a/../b",
		"/a", "a/", "a//b", `a\b`, "a\x00b", "a\tb", "a\x7fb", "a\u0085b", "a\u00a0b", "", "...a",
		"a.", "a/.", "./a",
	}
	for _, k := range keys {
		m := asrPayload(k)
		schemaOK := reg.validate(StepASR, m, "") == nil
		goOK := keyProblem(k) == ""
		if schemaOK != goOK {
			t.Errorf("key %q: schema accepts %v, keyProblem accepts %v (%q)", k, schemaOK, goOK, keyProblem(k))
		}
	}
}

func asrPayload(audioKey string) map[string]any {
	return map[string]any{"audio_key": audioKey, "language": "en", "output_key": "asr/x/asr.json"}
}
