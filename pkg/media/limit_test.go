package media

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestExtractAudioEnforcesTheRealLength extracts a file whose container
// claims 2 s while its streams run 20 s: under a 6 s limit the probe sees
// nothing wrong, the decode stops at 6 s plus slack and fails with
// ErrTooLong, and no output is left.
func TestExtractAudioEnforcesTheRealLength(t *testing.T) {
	ctx := context.Background()
	in := sample(t, SampleLongerThanClaimed)
	info, err := ProbeInput(ctx, in, Limits{MaxDuration: 6 * time.Second, RequireAudio: true, RequireVideo: true})
	if err != nil {
		t.Fatalf("probe of the lying file: %v (it should pass: it claims 2s)", err)
	}
	if info.Duration > 3*time.Second {
		t.Fatalf("the sample claims %v, want about 2s", info.Duration)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "out.wav")
	err = ExtractAudio(ctx, in, out, 6*time.Second)
	wantPermanent(t, err, "limit 6s")
	if !errors.Is(err, ErrTooLong) {
		t.Errorf("error %v does not wrap ErrTooLong", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("files left behind: %v", left)
	}
	// Without a limit the whole 20 s come out: the limit is what stops it.
	if err := ExtractAudio(ctx, in, out, 0); err != nil {
		t.Fatal(err)
	}
	if d, err := WAVFileDuration(out); err != nil || d < 19*time.Second {
		t.Errorf("unlimited extract: %v, %v; want 20s", d, err)
	}
	// Within the limit nothing changes.
	if err := ExtractAudio(ctx, in, out, 30*time.Second); err != nil {
		t.Errorf("extract within the limit: %v", err)
	}
}

func TestCheckLength(t *testing.T) {
	if err := CheckLength("x", 6500*time.Millisecond, 6*time.Second); err != nil {
		t.Errorf("padding within the tolerance: %v", err)
	}
	if err := CheckLength("x", time.Hour, 0); err != nil {
		t.Errorf("no limit: %v", err)
	}
	err := CheckLength("the audio of x", 8*time.Second, 6*time.Second)
	wantPermanent(t, err, "the audio of x runs at least 8s, limit 6s")
}

// TestMuxEnforcesTheRealLength muxes the same lying file: the dub is made
// for the 2 s the container claims, but the video stream runs 20 s. Under a
// 6 s limit the output stops at the limit plus slack and the mux fails with
// ErrTooLong; without a limit the whole video is copied.
func TestMuxEnforcesTheRealLength(t *testing.T) {
	ctx := context.Background()
	in := sample(t, SampleLongerThanClaimed)
	dir := t.TempDir()
	clip := filepath.Join(dir, "clip.wav")
	makeTone(t, clip, 1000)
	dub := filepath.Join(dir, "dub.wav")
	if _, err := AssembleDub(ctx, DubInput{Placements: Fit([]Slot{{Idx: 0, StartMS: 0, EndMS: 1000, AudioMS: 1000}}, FitOptions{TotalMS: 2000}),
		Clip: func(int) string { return clip }, TotalMS: 2000}, dub); err != nil {
		t.Fatal(err)
	}
	outDir := t.TempDir()
	out := filepath.Join(outDir, "final.mp4")
	err := Mux(ctx, MuxInput{Video: in, DubWav: dub, DubLanguage: "es", OriginalLanguage: "en", MaxDuration: 6 * time.Second}, out)
	wantPermanent(t, err, "limit 6s")
	if !errors.Is(err, ErrTooLong) {
		t.Errorf("error %v does not wrap ErrTooLong", err)
	}
	if left, _ := os.ReadDir(outDir); len(left) != 0 {
		t.Errorf("files left behind: %v", left)
	}
	if err := Mux(ctx, MuxInput{Video: in, DubWav: dub, DubLanguage: "es", OriginalLanguage: "en"}, out); err != nil {
		t.Fatal(err)
	}
	if got, err := Probe(ctx, out); err != nil || got.Duration < 19*time.Second {
		t.Errorf("unlimited mux lasts %v (%v), want the 20s the streams hold", got.Duration, err)
	}
	// A video that claims more than the limit is refused before any work.
	wantPermanent(t, Mux(ctx, MuxInput{Video: in, DubWav: dub, MaxDuration: 500 * time.Millisecond}, out), "as its container claims")
}
