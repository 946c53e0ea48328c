package database

import (
	"strings"
	"testing"
)

// TestActorName: --as names who acts (checked like people's text), else
// the operating-system user; never nothing.
func TestActorName(t *testing.T) {
	t.Parallel()
	none := func(string) string { return "" }
	if got, err := ActorName("ana", none); err != nil || got != "ana" {
		t.Errorf("--as ana: %q, %v", got, err)
	}
	for _, bad := range []string{"ana\x1b[2J", "a\u202eb", strings.Repeat("x", maxActorLength+1)} {
		if _, err := ActorName(bad, none); err == nil {
			t.Errorf("--as %q admitted", bad)
		}
	}
	if got, err := ActorName("", none); err != nil || got == "" {
		t.Errorf("no --as: %q, %v", got, err)
	}
}
