package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"

	"github.com/dubflow/dubflow/pkg/media"
)

// isSilent reports whether the audio in path never rises above
// media.SilenceDB, as media.IsSilent does. A 16-bit PCM WAV file (what
// extract_audio stores and the chunker cuts) is read here, without an
// ffmpeg start (~0.25 CPU-s, most of it loading ffmpeg's libraries: more
// than reading an 11 s clip); anything else goes to media.IsSilent.
func isSilent(ctx context.Context, path string) (bool, error) {
	if silent, ok := wavSilent(path); ok {
		return silent, nil
	}
	return media.IsSilent(ctx, path)
}

// wavSilent decides silence from the samples of a 16-bit PCM WAV file
// the way ffmpeg's volumedetect does: the peak is the largest magnitude of
// any sample, its level 10·log10(peak²/2³⁰) dB printed to one decimal
// (volumedetect's "max_volume"), and silent means under media.SilenceDB.
// ok is false when the file is not such a WAV or holds no sample, for
// media.IsSilent to decide (and to explain what is wrong).
func wavSilent(path string) (silent, ok bool) {
	f, err := os.Open(path)
	if err != nil {
		return false, false
	}
	defer f.Close()
	peak, n, err := wavPeak(bufio.NewReaderSize(f, 64<<10))
	if err != nil || n == 0 {
		return false, false
	}
	return peakDB(peak) < media.SilenceDB, true
}

// wavPeak returns the largest sample magnitude of a 16-bit PCM WAV stream
// and how many samples it holds.
func wavPeak(r io.Reader) (peak int, samples int64, err error) {
	w, err := media.NewWAVReader(r)
	if err != nil {
		return 0, 0, err
	}
	if w.Format.BitsPerSample != 16 {
		return 0, 0, fmt.Errorf("%d-bit samples: %w", w.Format.BitsPerSample, media.ErrNotWAV)
	}
	buf := make([]int16, 32<<10)
	for {
		n, err := w.ReadSamples(buf)
		for _, s := range buf[:n] {
			peak = max(peak, abs16(s))
		}
		samples += int64(n)
		switch {
		case errors.Is(err, io.EOF):
			return peak, samples, nil
		case err != nil:
			return 0, 0, err
		}
	}
}

func abs16(s int16) int {
	if s < 0 {
		return -int(s)
	}
	return int(s)
}

// peakDB is volumedetect's max_volume for a peak magnitude: -91 dB (its
// floor) for digital silence, else the level rounded to 0.1 dB as it
// prints it.
func peakDB(peak int) float64 {
	if peak == 0 {
		return -91
	}
	db := 10 * math.Log10(float64(peak)*float64(peak)/(1<<30))
	rounded, _ := strconv.ParseFloat(strconv.FormatFloat(db, 'f', 1, 64), 64)
	return rounded
}
