package main

import (
	"slices"
	"testing"

	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

// TestRebuildNamesTheTTSPart: a tts part that never ran and whose message
// is not kept is rebuilt with its batch's segment ids, so that the message
// re-drives that part (not the whole task); the whole task's part stays a
// message without segment ids.
func TestRebuildNamesTheTTSPart(t *testing.T) {
	t.Parallel()
	row := taskRow{id: uuid.New(), speaker: "es"}
	for _, part := range []string{"seg-0,seg-1", ""} {
		env, err := rebuild(row, wire.StepTTS, part)
		if err != nil {
			t.Fatalf("part %q: %v", part, err)
		}
		got, err := step.PartOf(env)
		if err != nil || got != part {
			t.Errorf("part %q rebuilt as part %q (%v)", part, got, err)
		}
		var p wire.TTS
		if err := env.UnmarshalPayload(&p); err != nil {
			t.Fatal(err)
		}
		if p.TaskID != row.id || p.SpeakerID != "es" {
			t.Errorf("part %q: payload %+v", part, p)
		}
		if part != "" && !slices.Equal(p.SegmentIDs, []string{"seg-0", "seg-1"}) {
			t.Errorf("part %q: segment ids %v", part, p.SegmentIDs)
		}
		if part == "" && p.SegmentIDs != nil {
			t.Errorf("whole task: segment ids %v", p.SegmentIDs)
		}
	}
	if _, err := rebuild(row, wire.StepTTS, "seg-0..seg-99#abcdef"); err == nil {
		t.Error("a hashed part name was rebuilt")
	}
}
