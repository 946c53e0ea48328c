package media

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
)

// ClipMeasure is the length of a clip and the silence at its edges.
type ClipMeasure struct {
	DurationMS int
	// LeadMS and TrailMS are the silence before the first and after the
	// last 10 ms that hold sound: a peak within speechRangeDB of the
	// clip's peak, noiseMargin over its noise and above silenceFloor. A
	// clip without sound is all lead.
	LeadMS, TrailMS int
}

const (
	// speechRangeDB: the quietest onset (a soft consonant) is about 35 dB
	// under a line's peak.
	speechRangeDB = 35
	// silenceFloor is -60 dBFS in 16-bit samples: quieter is silence.
	silenceFloor = 33
	// noiseMargin: sound is 12 dB over the clip's noise (the peak of its
	// quietest tenth), so that a recording's room noise is no speech.
	noiseMargin = 4
)

// MeasureClip measures the PCM WAV clip at path; the silence only when
// its samples are 16-bit.
func MeasureClip(path string) (ClipMeasure, error) {
	f, err := os.Open(path)
	if err != nil {
		return ClipMeasure{}, err
	}
	defer f.Close()
	r, err := NewWAVReader(f)
	if err != nil {
		return ClipMeasure{}, fmt.Errorf("measure clip %s: %w", path, err)
	}
	if r.Format.BitsPerSample != 16 {
		return ClipMeasure{DurationMS: int(r.Duration().Milliseconds())}, nil
	}
	window := max(r.Format.SampleRate/100, 1) * r.Format.Channels // 10 ms of samples
	var peaks []int
	peak, fill, samples := 0, 0, int64(0)
	buf := make([]int16, 16<<10)
	for {
		n, err := r.ReadSamples(buf)
		for _, s := range buf[:n] {
			if peak, fill = max(peak, int(s), -int(s)), fill+1; fill == window {
				peaks, peak, fill = append(peaks, peak), 0, 0
			}
		}
		samples += int64(n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return ClipMeasure{}, fmt.Errorf("measure clip %s: %w", path, err)
		}
	}
	if fill > 0 {
		peaks = append(peaks, peak)
	}
	m := ClipMeasure{DurationMS: int(samples / int64(r.Format.Channels) * 1000 / int64(r.Format.SampleRate))}
	m.LeadMS, m.TrailMS = silentEdges(peaks, m.DurationMS)
	return m, nil
}

// silentEdges returns the silence before the first and after the last
// loud window of 10 ms peaks in a clip of durationMS.
func silentEdges(peaks []int, durationMS int) (leadMS, trailMS int) {
	if len(peaks) == 0 {
		return durationMS, 0
	}
	sorted := slices.Sorted(slices.Values(peaks))
	top, noise := sorted[len(sorted)-1], sorted[len(sorted)/10]
	loud := max(int(float64(top)*math.Pow(10, -speechRangeDB/20.0)), noise*noiseMargin, silenceFloor)
	first, last := -1, -1
	for i, p := range peaks {
		if p >= loud {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 {
		return durationMS, 0
	}
	return min(first*10, durationMS), max(durationMS-(last+1)*10, 0)
}
