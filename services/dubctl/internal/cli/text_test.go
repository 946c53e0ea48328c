package cli

import (
	"testing"

	"github.com/google/uuid"
)

// TestLanguageOutput: the file of each language beside --output (the
// targets themselves are pkg/admit's, tested there).
func TestLanguageOutput(t *testing.T) {
	t.Parallel()
	id := uuid.MustParse("550e8400-e29b-41d4-a716-446655440000")
	if got := LanguageOutput("out/talk.mp4", id, "ca"); got != "out/talk.ca.mp4" {
		t.Errorf("languageOutput = %s", got)
	}
	if got := LanguageOutput("", id, "ca"); got != id.String()+".ca.mp4" {
		t.Errorf("languageOutput = %s", got)
	}
}
