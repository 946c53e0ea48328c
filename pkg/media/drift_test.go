package media

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/dubflow/dubflow/pkg/speech/speechtest"
)

// TestMeasureClip finds the silence around speech in real clips: the jfk
// recording (room noise, then speech from about 0.35 s) and an espeak-ng
// line padded with 300 ms of silence before and 400 ms after (on top of
// what espeak-ng leaves).
func TestMeasureClip(t *testing.T) {
	dir := t.TempDir()
	padded := paddedSpanish(t, dir, "Y así, compatriotas americanos.")
	raw, err := MeasureClip(filepath.Join(dir, "raw.wav"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		clip               string
		leadFrom, leadTo   int
		trailFrom, trailTo int
	}{
		{speechtest.Fixture(t, "jfk.wav"), 250, 450, 0, 1500},
		{padded, raw.LeadMS + 290, raw.LeadMS + 320, raw.TrailMS + 390, raw.TrailMS + 420},
	} {
		m, err := MeasureClip(tc.clip)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %+v", filepath.Base(tc.clip), m)
		if m.LeadMS < tc.leadFrom || m.LeadMS > tc.leadTo || m.TrailMS < tc.trailFrom || m.TrailMS > tc.trailTo {
			t.Errorf("%s: lead %d ms, trail %d ms: want lead %d..%d, trail %d..%d", tc.clip, m.LeadMS, m.TrailMS,
				tc.leadFrom, tc.leadTo, tc.trailFrom, tc.trailTo)
		}
	}
}

// paddedSpanish speaks text with espeak-ng and pads it with 300 ms of
// silence before and 400 ms after, as neural engines' clips come.
func paddedSpanish(t *testing.T, dir, text string) string {
	t.Helper()
	raw, out := filepath.Join(dir, "raw.wav"), filepath.Join(dir, "padded.wav")
	spanish(t, text, raw)
	b, err := exec.Command("ffmpeg", "-nostdin", "-v", "error", "-i", raw, "-af", "adelay=300,apad=pad_dur=0.4",
		"-c:a", "pcm_s16le", "-y", out).CombinedOutput()
	if err != nil {
		t.Fatalf("pad: %v: %s", err, b)
	}
	return out
}

// TestDubStartsWithItsLine dubs two lines whose clips begin with silence
// (the jfk recording's room noise, a padded espeak-ng line): the dubbed
// speech starts within 0.1 s of its source line in the track, and the
// timing report's start drift says where it starts (within 40 ms of the
// measured onset).
func TestDubStartsWithItsLine(t *testing.T) {
	dir := t.TempDir()
	clips := []string{speechtest.Fixture(t, "jfk.wav"), paddedSpanish(t, dir, "Pregunten qué pueden hacer ustedes por su país.")}
	var slots []Slot
	for i, c := range clips {
		m, err := MeasureClip(c)
		if err != nil {
			t.Fatal(err)
		}
		start := 1000 + i*14000
		slots = append(slots, Slot{Idx: i, StartMS: start, EndMS: start + 11000, NextStartMS: start + 14000,
			AudioMS: m.DurationMS, LeadMS: m.LeadMS, TrailMS: m.TrailMS})
	}
	const totalMS = 30000
	placements := Fit(slots, FitOptions{TotalMS: totalMS})
	out := filepath.Join(dir, "dub.wav")
	if _, err := AssembleDub(context.Background(), DubInput{Placements: placements, Clip: func(i int) string { return clips[i] },
		TotalMS: totalMS}, out); err != nil {
		t.Fatal(err)
	}
	r := readWAV(t, out)
	samples := readAll(t, r, 1<<16)
	perMS := r.Format.SampleRate / 1000
	for _, p := range placements {
		line := samples[(p.StartMS-200)*perMS : p.EndMS()*perMS]
		top := 0
		for _, s := range line {
			top = max(top, abs(int(s)))
		}
		onset := -1
		for i, s := range line { // the first sample within 20 dB of the line's peak
			if abs(int(s))*10 >= top {
				onset = i
				break
			}
		}
		measured := float64(onset)/float64(perMS) - 200
		t.Logf("segment %d (%s): trimmed %d ms, report start drift %d ms, measured onset %+.1f ms", p.Idx, p.Note,
			p.TrimStartMS, p.StartDriftMS, measured)
		if measured < -100 || measured > 100 {
			t.Errorf("segment %d: speech starts %+.1f ms from its line: want within 100 ms", p.Idx, measured)
		}
		if d := measured - float64(p.StartDriftMS); d < -40 || d > 40 {
			t.Errorf("segment %d: report says start drift %d ms, measured %+.1f ms", p.Idx, p.StartDriftMS, measured)
		}
	}
}
