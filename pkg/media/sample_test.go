package media

import (
	"context"
	"path/filepath"
	"testing"
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
