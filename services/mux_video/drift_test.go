package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/wire"
)

// TestMuxVideoStartDrift gives the first line a clip that starts with
// 300 ms of silence, as neural engines' clips do: the step trims it, the
// dubbed speech starts within 0.1 s of the source line in the dub track,
// and the timing report's start drift says so (within 40 ms of the
// measured onset).
func TestMuxVideoStartDrift(t *testing.T) {
	t.Parallel()
	c := newMuxCase(t)
	ctx := context.Background()
	dir := t.TempDir()
	key := wire.SegmentKey(c.id, 0)
	clip, padded := filepath.Join(dir, "clip.wav"), filepath.Join(dir, "padded.wav")
	if err := c.s.Blob.GetFile(ctx, key, clip, 64<<20); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("ffmpeg", "-nostdin", "-v", "error", "-i", clip, "-af", "adelay=300", "-c:a", "pcm_s16le", "-y", padded).CombinedOutput(); err != nil {
		t.Fatalf("pad clip: %v: %s", err, b)
	}
	if err := c.s.Blob.PutFile(ctx, key, padded, "audio/wav"); err != nil {
		t.Fatal(err)
	}
	none := media.BackgroundNone
	c.mux(t, &wire.MuxOptions{BackgroundMode: none})

	b, err := c.s.Blob.Get(ctx, "outputs/"+c.id.String()+"/timing.json", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var report media.TimingReport
	if err := json.Unmarshal(b, &report); err != nil {
		t.Fatal(err)
	}
	first := report.Segments[0]
	dub, err := c.s.Blob.Get(ctx, c.keys.DubAudio, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	measured := onsetMS(t, dub, first.StartMS-200, first.EndMS()) - float64(first.StartMS)
	t.Logf("segment 0: trimmed %d ms, report start drift %d ms, measured %+.1f ms", first.TrimStartMS, first.StartDriftMS, measured)
	if measured < -100 || measured > 100 {
		t.Errorf("the dubbed line starts %+.1f ms from its source line: want within 100 ms", measured)
	}
	if d := measured - float64(first.StartDriftMS); d < -40 || d > 40 || report.Summary.MaxStartDriftMS > 100 {
		t.Errorf("report: start drift %d ms (max %d), measured %+.1f ms", first.StartDriftMS, report.Summary.MaxStartDriftMS, measured)
	}
}

// onsetMS returns where, between from and to ms of a mono 16-bit WAV, the
// first sample within 20 dB of that stretch's peak is.
func onsetMS(t *testing.T, wav []byte, from, to int) float64 {
	t.Helper()
	r, err := media.NewWAVReader(bytes.NewReader(wav))
	if err != nil {
		t.Fatal(err)
	}
	samples := make([]int16, r.Frames*int64(r.Format.Channels))
	if _, err := r.ReadSamples(samples); err != nil {
		t.Fatal(err)
	}
	perMS := r.Format.SampleRate / 1000 * r.Format.Channels
	line := samples[from*perMS : to*perMS]
	top := 0
	for _, s := range line {
		top = max(top, int(s), -int(s))
	}
	for i, s := range line {
		if max(int(s), -int(s))*10 >= top {
			return float64(from) + float64(i)/float64(perMS)
		}
	}
	t.Fatalf("no sound between %d and %d ms", from, to)
	return 0
}
