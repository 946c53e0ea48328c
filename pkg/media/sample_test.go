package media

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

func TestMakeSampleVideoHostileText(t *testing.T) {
	requireTools(t)
	ctx := context.Background()
	out := filepath.Join(t.TempDir(), "hostile.mp4")
	// Text that would be options or shell syntax if it reached a command line.
	text := `--help -w /tmp/x; $(echo owned) "quoted" 'single' and then some words`
	if err := MakeSampleVideo(ctx, text, out, SampleOptions{Width: 160, Height: 120}); err != nil {
		t.Fatal(err)
	}
	info, err := ProbeInput(ctx, out, Limits{RequireAudio: true, RequireVideo: true})
	if err != nil {
		t.Fatal(err)
	}
	if v := info.StreamsOf(VideoStream)[0]; v.Width != 160 || v.Height != 120 {
		t.Errorf("video %+v, want 160x120", v)
	}
	if silent, err := IsSilent(ctx, out); err != nil || silent {
		t.Errorf("IsSilent = %v, %v; want speech", silent, err)
	}
}

func TestMakeSampleVideoWithFliteVoice(t *testing.T) {
	requireTools(t)
	ctx := context.Background()
	out := filepath.Join(t.TempDir(), "flite.mp4")
	text := `-o /etc/passwd "quoted" and then some words`
	if err := MakeSampleVideo(ctx, text, out, SampleOptions{Voice: "flite:rms", Width: 160, Height: 120}); err != nil {
		t.Fatal(err)
	}
	info, err := ProbeInput(ctx, out, Limits{RequireAudio: true, RequireVideo: true})
	if err != nil {
		t.Fatal(err)
	}
	if info.Duration < 2*time.Second {
		t.Errorf("duration %s: the speech is missing", info.Duration)
	}
	if silent, err := IsSilent(ctx, out); err != nil || silent {
		t.Errorf("IsSilent = %v, %v; want speech", silent, err)
	}
	if err := MakeSampleVideo(ctx, "words", out, SampleOptions{Voice: "flite:no-such-voice"}); err == nil {
		t.Error("an unknown flite voice was accepted")
	}
}
