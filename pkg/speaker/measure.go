package speaker

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/dubflow/dubflow/pkg/media"
)

// Span is a segment of the recording, in milliseconds.
type Span struct {
	StartMS, EndMS int
}

// Voice is what Measure found about one span.
type Voice struct {
	// PitchHz is the median fundamental frequency of its voiced frames,
	// 0 when it has too few voiced frames to tell.
	PitchHz float64
	// BrightnessHz is the median RMS frequency of the spectrum of its
	// voiced frames (the square root of the spectrum's second moment).
	BrightnessHz float64
	// Voiced is the number of voiced frames measured.
	Voiced int
}

const (
	frameMS      = 40  // analysis frame
	hopMS        = 40  // distance between frames
	maxFrames    = 150 // frames measured per span, spread over it
	minPitchHz   = 60
	maxPitchHz   = 400
	voicedCorr   = 0.5 // normalized autocorrelation of a voiced frame
	minVoiced    = 3   // voiced frames needed for a pitch
	silenceLevel = 300 // RMS below which a 16-bit frame is silence
)

// Measure reads a 16-bit PCM WAV stream (channels are mixed) once and
// returns the voice of each span. Spans must be in time order; an overlap
// is measured from where the previous span ended. Memory stays at one
// span's samples.
func Measure(r io.Reader, spans []Span) ([]Voice, error) {
	wr, err := media.NewWAVReader(r)
	if err != nil {
		return nil, fmt.Errorf("measure voices: %w", err)
	}
	ch := wr.Format.Channels
	rate := wr.Format.SampleRate
	if ch < 1 || rate < 8000 {
		return nil, fmt.Errorf("measure voices: %d channels at %d Hz: %w", ch, rate, media.ErrNotWAV)
	}
	src := &mono{r: wr, ch: ch, buf: make([]int16, 4096*ch)}
	out := make([]Voice, len(spans))
	var pos int64 // frames read so far
	for i, s := range spans {
		start := int64(s.StartMS) * int64(rate) / 1000
		end := int64(s.EndMS) * int64(rate) / 1000
		if err := src.skip(start - pos); err != nil {
			return out, nil // the recording ends early: the rest stays unknown
		}
		pos = max(pos, start)
		samples, err := src.take(end - pos)
		pos += int64(len(samples))
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("measure voices: %w", err)
		}
		out[i] = voiceOf(samples, rate)
	}
	return out, nil
}

// mono reads a WAV's samples with the channels averaged.
type mono struct {
	r    *media.WAVReader
	ch   int
	buf  []int16
	have []float64
}

// fill reads more samples into have.
func (m *mono) fill() error {
	n, err := m.r.ReadSamples(m.buf)
	for f := 0; f+m.ch <= n; f += m.ch {
		sum := 0.0
		for c := range m.ch {
			sum += float64(m.buf[f+c])
		}
		m.have = append(m.have, sum/float64(m.ch))
	}
	if n == 0 && err == nil {
		return io.ErrNoProgress
	}
	return err
}

// skip drops n samples.
func (m *mono) skip(n int64) error {
	for n > 0 {
		if len(m.have) == 0 {
			if err := m.fill(); err != nil && len(m.have) == 0 {
				return err
			}
		}
		k := min(n, int64(len(m.have)))
		m.have = m.have[k:]
		n -= k
	}
	return nil
}

// take returns the next n samples (fewer at the end of the stream).
func (m *mono) take(n int64) ([]float64, error) {
	out := make([]float64, 0, max(n, 0))
	for int64(len(out)) < n {
		if len(m.have) == 0 {
			if err := m.fill(); err != nil && len(m.have) == 0 {
				return out, err
			}
		}
		k := min(n-int64(len(out)), int64(len(m.have)))
		out = append(out, m.have[:k]...)
		m.have = m.have[k:]
	}
	return out, nil
}

// voiceOf measures the voiced frames of one span's samples.
func voiceOf(x []float64, rate int) Voice {
	size := rate * frameMS / 1000
	hop := rate * hopMS / 1000
	frames := (len(x) - size) / hop
	if frames < 1 {
		return Voice{}
	}
	step := max(1, frames/maxFrames)
	var pitches, brights []float64
	for f := 0; f < frames; f += step {
		frame := x[f*hop : f*hop+size]
		p, bright, ok := frameVoice(frame, rate)
		if ok {
			pitches = append(pitches, p)
			brights = append(brights, bright)
		}
	}
	v := Voice{Voiced: len(pitches)}
	if len(pitches) >= minVoiced {
		v.PitchHz, v.BrightnessHz = median(pitches), median(brights)
	}
	return v
}

// frameVoice returns the pitch and RMS frequency of a frame, ok when the
// frame is loud enough and clearly periodic.
func frameVoice(frame []float64, rate int) (pitch, bright float64, ok bool) {
	var energy, diff, mean float64
	for _, s := range frame {
		mean += s
	}
	mean /= float64(len(frame))
	for i, s := range frame {
		s -= mean
		energy += s * s
		if i > 0 {
			d := s - (frame[i-1] - mean)
			diff += d * d
		}
	}
	if math.Sqrt(energy/float64(len(frame))) < silenceLevel {
		return 0, 0, false
	}
	lag, corr := bestLag(frame, mean, rate/maxPitchHz, rate/minPitchHz)
	if corr < voicedCorr {
		return 0, 0, false
	}
	// For a sinusoid of angular frequency w, diff/energy = 4 sin²(w/2).
	ratio := math.Min(diff/energy, 4)
	w := 2 * math.Asin(math.Sqrt(ratio)/2)
	return float64(rate) / float64(lag), w * float64(rate) / (2 * math.Pi), true
}

// bestLag returns the lag in [lo, hi] with the highest normalized
// autocorrelation of the frame, and that correlation. The shortest lag
// within 10% of the best peak wins, so that twice the period (an octave
// below) is not taken for the pitch.
func bestLag(frame []float64, mean float64, lo, hi int) (int, float64) {
	n := len(frame)
	corrs := make([]float64, 0, hi-lo+1)
	bestCorr := 0.0
	for lag := lo; lag <= hi && lag < n/2; lag++ {
		var xy, xx, yy float64
		for i := 0; i+lag < n; i++ {
			a, b := frame[i]-mean, frame[i+lag]-mean
			xy += a * b
			xx += a * a
			yy += b * b
		}
		c := 0.0
		if xx > 0 && yy > 0 {
			c = xy / math.Sqrt(xx*yy)
		}
		corrs = append(corrs, c)
		bestCorr = math.Max(bestCorr, c)
	}
	for i, c := range corrs {
		peak := (i == 0 || c >= corrs[i-1]) && (i+1 == len(corrs) || c >= corrs[i+1])
		if peak && c >= 0.9*bestCorr {
			return lo + i, c
		}
	}
	return 0, 0
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
