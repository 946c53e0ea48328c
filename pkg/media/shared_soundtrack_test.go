package media

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestSharedSoundtrackSameDub assembles a 30 s timeline whose voice is
// made in one part, with the soundtrack decoded by that part's ffmpeg
// (sharedSoundtrack) and by an ffmpeg of its own: the two dub tracks are
// the same to the byte.
func TestSharedSoundtrackSameDub(t *testing.T) {
	requireTools(t)
	dir := t.TempDir()
	in := makeBenchInput(t, dir, 1)
	const totalMS = 30_000
	var placements []Placement
	for _, p := range in.placements {
		if p.EndMS() <= totalMS-1000 {
			placements = append(placements, p)
		}
	}
	if parts := splitVoice(placements, totalMS, 8); len(parts) != 1 {
		t.Fatalf("%d parts, want one", len(parts))
	}
	var speech []Span
	for _, s := range in.speech {
		if s.EndMS <= totalMS {
			speech = append(speech, s)
		}
	}
	dubs := map[bool][]byte{}
	for _, shared := range []bool{true, false} {
		prev := sharedSoundtrackMaxMS
		if !shared {
			sharedSoundtrackMaxMS = 0
		}
		out := filepath.Join(dir, "dub.wav")
		rep, err := AssembleDub(context.Background(), DubInput{Placements: placements, Clip: in.clip, TotalMS: totalMS,
			Original: in.soundtrack, OriginalChannels: 1, Speech: speech, Mix: MixOptions{Background: BackgroundDuck}}, out)
		sharedSoundtrackMaxMS = prev
		if err != nil {
			t.Fatal(err)
		}
		if rep.Background != BackgroundDuck || rep.Stretched == 0 {
			t.Fatalf("report %+v: want the soundtrack ducked and lines stretched", rep)
		}
		if dubs[shared], err = os.ReadFile(out); err != nil {
			t.Fatal(err)
		}
	}
	if len(dubs[true]) < 30*mixRate*2 || !bytes.Equal(dubs[true], dubs[false]) {
		t.Errorf("shared soundtrack: %d bytes; its own ffmpeg: %d bytes; equal: %v",
			len(dubs[true]), len(dubs[false]), bytes.Equal(dubs[true], dubs[false]))
	}
}
