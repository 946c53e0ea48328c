package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/dubflow/dubflow/pkg/media"
)

// TestSilenceAsFFmpegSays holds the in-process silence check to ffmpeg's
// volumedetect (media.IsSilent) on WAV files whose peak is around the
// threshold (-50 dB is a peak of ~103.6), either sign, and at the ends of
// the range.
func TestSilenceAsFFmpegSays(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, peak := range []int16{0, 1, 100, 102, 103, -103, 104, -104, 105, 110, 32767, -32768} {
		path := filepath.Join(dir, "peak.wav")
		writePeakWAV(t, path, peak)
		want, err := media.IsSilent(ctx, path)
		if err != nil {
			t.Fatalf("peak %d: ffmpeg: %v", peak, err)
		}
		got, ok := wavSilent(path)
		if !ok {
			t.Fatalf("peak %d: the WAV was not read", peak)
		}
		if got != want {
			t.Errorf("peak %d (%.1f dB): silent %v, ffmpeg says %v", peak, peakDB(abs16(peak)), got, want)
		}
	}
}

// TestSilenceOfOtherFilesIsFFmpegs: a file that is not a 16-bit WAV, or a
// WAV without samples, is left to ffmpeg, with its answer or error.
func TestSilenceOfOtherFilesIsFFmpegs(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.wav")
	if err := os.WriteFile(text, []byte("not audio at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.wav")
	f, err := os.Create(empty)
	if err != nil {
		t.Fatal(err)
	}
	w, err := media.NewWAVWriter(f, 16000, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, path := range []string{text, empty} {
		if _, ok := wavSilent(path); ok {
			t.Errorf("%s: read in process, want it left to ffmpeg", filepath.Base(path))
		}
		_, want := media.IsSilent(context.Background(), path)
		_, got := isSilent(context.Background(), path)
		if (got == nil) != (want == nil) {
			t.Errorf("%s: error %v, ffmpeg's %v", filepath.Base(path), got, want)
		}
	}
}

// writePeakWAV writes a second of 16 kHz mono silence with every 100th
// sample at peak (a single loud sample makes volumedetect print a line per
// dB down to -91, and media.IsSilent keeps only the tail of ffmpeg's log:
// it then finds no result).
func writePeakWAV(t *testing.T, path string, peak int16) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := media.NewWAVWriter(f, 16000, 1)
	if err != nil {
		t.Fatal(err)
	}
	samples := make([]int16, 16000)
	for i := 0; i < len(samples); i += 100 {
		samples[i] = peak
	}
	if err := w.WriteSamples(samples); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}
