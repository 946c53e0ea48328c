package media

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// makeTone writes a 1 kHz mono tone of ms milliseconds at 22.05 kHz, the
// rate espeak-ng produces.
func makeTone(t testing.TB, path string, ms int) {
	t.Helper()
	requireTools(t)
	src := fmt.Sprintf("sine=frequency=1000:sample_rate=22050:duration=%.3f", float64(ms)/1000)
	out, err := exec.Command("ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i", src, "-c:a", "pcm_s16le", "-y", path).CombinedOutput()
	if err != nil {
		t.Fatalf("make tone: %v: %s", err, out)
	}
}

// loudness returns, per 10 ms window of a mono WAV, whether it holds sound.
func loudness(t *testing.T, path string) []bool {
	t.Helper()
	r := readWAV(t, path)
	window := r.Format.SampleRate / 100
	samples := readAll(t, r, 4096)
	var out []bool
	for i := 0; i+window <= len(samples); i += window {
		peak := 0
		for _, s := range samples[i : i+window] {
			peak = max(peak, abs(int(s)))
		}
		out = append(out, peak > 1000)
	}
	return out
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func TestAssembleDub(t *testing.T) {
	dir := t.TempDir()
	slots := []Slot{
		{Idx: 0, StartMS: 500, EndMS: 2500, NextStartMS: 3000, AudioMS: 1000},  // padded
		{Idx: 1, StartMS: 3000, EndMS: 5000, NextStartMS: 6000, AudioMS: 2600}, // borrows 600 ms
		{Idx: 2, StartMS: 6000, EndMS: 8000, NextStartMS: 8000, AudioMS: 2700}, // sped up 1.35x
		{Idx: 3, StartMS: 8000, EndMS: 9000, NextStartMS: 9500, AudioMS: 3000}, // truncated
		{Idx: 4, StartMS: 11000, EndMS: 11800, AudioMS: 1500},                  // runs past the timeline: cut at its end
	}
	const totalMS = 12000
	for _, s := range slots {
		makeTone(t, filepath.Join(dir, fmt.Sprintf("clip %d.wav", s.Idx)), s.AudioMS)
	}
	placements := Fit(slots, FitOptions{TotalMS: totalMS})
	out := filepath.Join(dir, "dub.wav")
	clip := func(idx int) string { return filepath.Join(dir, fmt.Sprintf("clip %d.wav", idx)) }
	if err := AssembleDub(context.Background(), placements, clip, totalMS, out); err != nil {
		t.Fatal(err)
	}

	r := readWAV(t, out)
	if r.Format != (WAVFormat{SampleRate: DubSampleRate, Channels: 1, BitsPerSample: 16}) {
		t.Errorf("format %+v", r.Format)
	}
	if want := int64(totalMS * DubSampleRate / 1000); r.Frames != want {
		t.Errorf("dub track has %d frames, want %d (%d ms)", r.Frames, want, totalMS)
	}
	info, err := Probe(context.Background(), out)
	if err != nil {
		t.Fatal(err)
	}
	if info.Duration.Milliseconds() != totalMS {
		t.Errorf("ffprobe duration %v, want %d ms", info.Duration, totalMS)
	}

	// Sound exactly where the placements say, silence elsewhere (20 ms of
	// slack at each edge for the tone's ramp and atempo's frames).
	loud := loudness(t, out)
	for w, isLoud := range loud {
		ms := w * 10
		inside, edge := false, false
		for _, p := range placements {
			end := min(p.EndMS(), totalMS)
			if ms >= p.StartMS+20 && ms+10 <= end-20 {
				inside = true
			}
			if ms+10 > p.StartMS-20 && ms < end+20 && !(ms >= p.StartMS+20 && ms+10 <= end-20) {
				edge = true
			}
		}
		if edge {
			continue
		}
		if inside != isLoud {
			t.Errorf("at %d ms: loud=%v, want %v", ms, isLoud, inside)
		}
	}
}

func TestAssembleDubErrors(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "clip.wav")
	if err := os.WriteFile(text, []byte("not audio at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "dub.wav")
	clip := func(int) string { return text }
	err := AssembleDub(context.Background(), []Placement{{Idx: 7, StartMS: 0, OutMS: 500, Tempo: 1}}, clip, 1000, out)
	wantPermanent(t, err, "not a media file")
	if !strings.Contains(err.Error(), "segment 7") {
		t.Errorf("error %q does not name the segment", err)
	}

	overlap := []Placement{{Idx: 0, StartMS: 0, OutMS: 500, Tempo: 1}, {Idx: 1, StartMS: 400, OutMS: 500, Tempo: 1}}
	makeTone(t, text, 600)
	err = AssembleDub(context.Background(), overlap, clip, 1000, out)
	if err == nil || !strings.Contains(err.Error(), "before the previous one ends") {
		t.Errorf("overlap: got %v", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("output left behind after failures (stat: %v)", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
}

// spreadTimeline places n one-second clips evenly over totalMS.
func spreadTimeline(n, totalMS int) []Placement {
	var slots []Slot
	for i := range n {
		start := i * totalMS / n
		slots = append(slots, Slot{Idx: i, StartMS: start, EndMS: start + 1000, NextStartMS: start + 2000, AudioMS: 1000})
	}
	return Fit(slots, FitOptions{TotalMS: totalMS})
}

// allocated returns the bytes the Go heap allocated while running f.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestAssembleDubMemoryIsFlatInTimelineLength(t *testing.T) {
	dir := t.TempDir()
	clip := filepath.Join(dir, "clip.wav")
	makeTone(t, clip, 1000)
	clips := func(int) string { return clip }
	run := func(totalMS int) uint64 {
		out := filepath.Join(dir, fmt.Sprintf("dub-%d.wav", totalMS))
		var err error
		n := allocated(func() { err = AssembleDub(context.Background(), spreadTimeline(5, totalMS), clips, totalMS, out) })
		if err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(out); err != nil || fi.Size() != wavHeaderSize+int64(totalMS)*DubSampleRate/1000*2 {
			t.Fatalf("dub track for %d ms: %v, %v bytes", totalMS, err, fi.Size())
		}
		return n
	}
	oneMinute, tenMinutes := run(60_000), run(600_000)
	t.Logf("allocated: 1-minute timeline %d B, 10-minute timeline %d B (track %d MB)", oneMinute, tenMinutes, 600*DubSampleRate*2>>20)
	// Ten minutes of 24 kHz 16-bit audio is 28 MB; a streaming assembly
	// allocates the same for both timelines, give or take exec noise.
	if tenMinutes > oneMinute+512<<10 {
		t.Errorf("10-minute timeline allocated %d B, 1-minute %d B: memory grows with the timeline", tenMinutes, oneMinute)
	}
}

func BenchmarkAssembleDub(b *testing.B) {
	dir := b.TempDir()
	clip := filepath.Join(dir, "clip.wav")
	makeTone(b, clip, 1000)
	for _, minutes := range []int{1, 10} {
		b.Run(fmt.Sprintf("%dmin-5segments", minutes), func(b *testing.B) {
			totalMS := minutes * 60_000
			placements := spreadTimeline(5, totalMS)
			out := filepath.Join(dir, "dub.wav")
			b.ReportAllocs()
			for b.Loop() {
				if err := AssembleDub(context.Background(), placements, func(int) string { return clip }, totalMS, out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestRenderClipTempo(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.wav")
	makeTone(t, in, 2700)
	for _, tempo := range []float64{1, 1.35, 1.5} {
		out := filepath.Join(dir, "out.wav")
		if err := renderClip(context.Background(), in, tempo, out); err != nil {
			t.Fatal(err)
		}
		r := readWAV(t, out)
		if r.Format.SampleRate != DubSampleRate || r.Format.Channels != 1 {
			t.Errorf("format %+v", r.Format)
		}
		want := time.Duration(2700/tempo) * time.Millisecond
		if d := (r.Duration() - want).Abs(); d > 30*time.Millisecond {
			t.Errorf("tempo %v: rendered %v, want about %v", tempo, r.Duration(), want)
		}
	}
	if err := renderClip(context.Background(), in, 0.2, filepath.Join(dir, "x.wav")); err == nil {
		t.Error("tempo 0.2 accepted")
	}
}
