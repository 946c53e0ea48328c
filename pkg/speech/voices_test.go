package speech

import (
	"context"
	"os/exec"
	"slices"
	"testing"
)

// TestEspeakVoices: the installed espeak-ng's voices are listed by code
// and other language, and its variants with a "+", lower case.
func TestEspeakVoices(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("espeak-ng"); err != nil {
		t.Skip("espeak-ng not installed")
	}
	voices, err := NewEspeak().Voices(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"en-us", "es", "en", "es-419", "+m3", "+f3", "+alex"} {
		if !slices.Contains(voices, want) {
			t.Errorf("voices lack %q: %v", want, voices)
		}
	}
	for _, not := range []string{"zz9", "gmw/en-us", "+nonexistent"} {
		if slices.Contains(voices, not) {
			t.Errorf("voices hold %q", not)
		}
	}
}
