package media

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"
)

// Background modes: what of the film's own soundtrack the dub track keeps.
const (
	// BackgroundDuck keeps the whole soundtrack and, wherever someone
	// speaks (the original line or its dub), lowers each frequency by as
	// much as it stands above the soundtrack's bed there, DuckDB at most
	// (see spectral.go): the original voice goes down, music, ambience
	// and effects go on under the dubbed voice and through the tail of a
	// source line that its dub does not cover.
	BackgroundDuck = "duck"
	// BackgroundReduceCenter does the same to the soundtrack's centre
	// (the mid, (L+R)/2) only and keeps its sides (L-R)/2 as they are: a
	// voice mixed to the centre drops out while the stereo music beside
	// it stays whole. A mono soundtrack has no sides and is ducked.
	BackgroundReduceCenter = "reduce_center"
	// BackgroundNone drops the soundtrack: the dub track is the voice alone.
	BackgroundNone = "none"
)

// Mix defaults and bounds.
const (
	// DefaultDuckDB is how far the soundtrack is lowered under speech
	// where the voice dominates it: deep enough that the original words
	// do not compete with the dub. Music and ambience are lowered only
	// where the voice covers them (spectral.go).
	DefaultDuckDB = -18.0
	MinDuckDB     = -60.0
	// DefaultLoudnessLUFS is the integrated loudness (EBU R128) of the dub
	// track: -16 LUFS is the level of speech content on the web and on
	// phones (AES TD1004, Apple, podcast platforms); broadcast's -23 sounds
	// too quiet next to other videos there. Set LOUDNESS_LUFS=-23 for TV.
	DefaultLoudnessLUFS = -16.0
	MinLoudnessLUFS     = -40.0
	MaxLoudnessLUFS     = -5.0
	// peakLimit is the sample peak the normalized track may reach (-1.5 dBFS).
	peakLimit = 0.8414
	// mixRate is the sample rate of the dub track: AAC's usual rate.
	mixRate = 48000
	// duckAttackMS and duckReleaseMS ramp the gain down before a line
	// starts and back up after it ends, so that the change is not a click.
	duckAttackMS, duckReleaseMS = 80, 250
	// maxGainDB bounds the loudness correction: a near-silent track is not
	// amplified into noise.
	maxGainDB = 24.0
)

// MixOptions say how the dub track is mixed.
type MixOptions struct {
	// Background is BackgroundDuck (when empty), BackgroundReduceCenter or
	// BackgroundNone.
	Background string
	// DuckDB (≤ 0) is the most the soundtrack is lowered under speech,
	// at the frequencies where the voice stands above the bed; 0 means
	// DefaultDuckDB.
	DuckDB float64
	// LoudnessLUFS is the integrated loudness of the result; 0 means
	// DefaultLoudnessLUFS.
	LoudnessLUFS float64
}

// Validate reports options out of range.
func (o MixOptions) Validate() error {
	switch o.Background {
	case "", BackgroundDuck, BackgroundReduceCenter, BackgroundNone:
	default:
		return fmt.Errorf("background mode %q: want %s, %s or %s", o.Background, BackgroundDuck, BackgroundReduceCenter, BackgroundNone)
	}
	if o.DuckDB > 0 || o.DuckDB < MinDuckDB || math.IsNaN(o.DuckDB) {
		return fmt.Errorf("ducking depth %v dB: want %v..0", o.DuckDB, MinDuckDB)
	}
	if o.LoudnessLUFS != 0 && (o.LoudnessLUFS < MinLoudnessLUFS || o.LoudnessLUFS > MaxLoudnessLUFS || math.IsNaN(o.LoudnessLUFS)) {
		return fmt.Errorf("loudness target %v LUFS: want %v..%v", o.LoudnessLUFS, MinLoudnessLUFS, MaxLoudnessLUFS)
	}
	return nil
}

func (o MixOptions) withDefaults() MixOptions {
	if o.Background == "" {
		o.Background = BackgroundDuck
	}
	if o.DuckDB == 0 {
		o.DuckDB = DefaultDuckDB
	}
	if o.LoudnessLUFS == 0 {
		o.LoudnessLUFS = DefaultLoudnessLUFS
	}
	return o
}

// MixReport says how a dub track was mixed.
type MixReport struct {
	// Background is the mode used: a requested reduce_center on a mono
	// soundtrack is reported as duck, any mode without a soundtrack as none.
	Background string  `json:"background"`
	DuckDB     float64 `json:"duck_db"`
	Channels   int     `json:"channels"`
	SampleRate int     `json:"sample_rate"`
	// MeasuredLUFS is the mix's integrated loudness before normalization,
	// GainDB the gain applied, TargetLUFS the target.
	MeasuredLUFS float64 `json:"measured_lufs"`
	GainDB       float64 `json:"gain_db"`
	TargetLUFS   float64 `json:"target_lufs"`
	// Stretched is how many lines rubberband stretched; Pieces how many
	// pieces (runs of clips played as they are, stretched clips) the
	// voice's filter graphs cut the joined clips into.
	Stretched int `json:"stretched"`
	Pieces    int `json:"pieces"`
}

// Span is a stretch of the timeline, in milliseconds.
type Span struct{ StartMS, EndMS int }

// toChannels converts a mono stream to channels without the -3 dB that
// ffmpeg's automatic upmix would apply.
func toChannels(channels int) string {
	if channels == 2 {
		return "pan=stereo|c0=c0|c1=c0"
	}
	return "anull"
}

// ducker is a gain over the timeline: 1 outside speech, DuckDB under
// every span, with linear ramps of duckAttackMS before and
// duckReleaseMS after each span. It is asked for frames in order.
type ducker struct {
	spans           []frameSpan // merged, in order
	i               int         // the first span that ends after the last frame asked
	low             float64
	attack, release int64
}

type frameSpan struct{ start, end int64 }

func newDucker(in DubInput, duckDB float64) *ducker {
	spans := make([]frameSpan, 0, len(in.Speech)+len(in.Placements))
	for _, s := range in.Speech {
		spans = append(spans, frameSpan{msToFrames(int64(s.StartMS), mixRate), msToFrames(int64(s.EndMS), mixRate)})
	}
	for _, p := range in.Placements {
		spans = append(spans, frameSpan{msToFrames(int64(p.StartMS), mixRate), msToFrames(int64(p.EndMS()), mixRate)})
	}
	slices.SortFunc(spans, func(a, b frameSpan) int { return cmp.Compare(a.start, b.start) })
	d := &ducker{low: math.Pow(10, duckDB/20), attack: msToFrames(duckAttackMS, mixRate), release: msToFrames(duckReleaseMS, mixRate)}
	for _, s := range spans {
		switch n := len(d.spans); {
		case s.end <= s.start:
		case n > 0 && s.start <= d.spans[n-1].end:
			d.spans[n-1].end = max(d.spans[n-1].end, s.end)
		default:
			d.spans = append(d.spans, s)
		}
	}
	return d
}

// gain is the soundtrack's gain at frame t: only the spans on either side
// of t matter, the ramps of any other being further away.
func (d *ducker) gain(t int64) float32 {
	for d.i < len(d.spans) && d.spans[d.i].end <= t {
		d.i++
	}
	g := 1.0
	if d.i < len(d.spans) {
		s := d.spans[d.i]
		if t >= s.start {
			return float32(d.low)
		}
		if t >= s.start-d.attack {
			g = d.low + (1-d.low)*float64(s.start-t)/float64(d.attack)
		}
	}
	if d.i > 0 {
		if p := d.spans[d.i-1]; t < p.end+d.release {
			g = min(g, d.low+(1-d.low)*float64(t-p.end+1)/float64(d.release))
		}
	}
	return float32(g)
}

// sampleReader reads raw little-endian samples: 16-bit integers or
// 32-bit floats.
type sampleReader struct {
	r    *bufio.Reader
	bits int
	raw  []byte
}

func newSampleReader(r io.Reader, bits int) *sampleReader {
	return &sampleReader{r: bufio.NewReaderSize(r, 256<<10), bits: bits}
}

// read fills dst, scaling 16-bit samples to ±1.
func (f *sampleReader) read(dst []float32) error {
	size := f.bits / 8
	if cap(f.raw) < size*len(dst) {
		f.raw = make([]byte, size*len(dst))
	}
	raw := f.raw[:size*len(dst)]
	if _, err := io.ReadFull(f.r, raw); err != nil {
		return err
	}
	if f.bits == 16 {
		for i := range dst {
			dst[i] = float32(int16(binary.LittleEndian.Uint16(raw[2*i:]))) / 32768
		}
		return nil
	}
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return nil
}

// toInt16 converts a sample within ±1 to 16 bits, rounding.
func toInt16(s float32) int16 {
	v := s * 32767
	if v >= 0 {
		return int16(min(v+0.5, 32767))
	}
	return int16(max(v-0.5, -32768))
}

// floatWriter writes raw little-endian 32-bit float samples.
type floatWriter struct {
	w   *bufio.Writer
	raw []byte
}

func newFloatWriter(w io.Writer) *floatWriter {
	return &floatWriter{w: bufio.NewWriterSize(w, 256<<10)}
}

func (f *floatWriter) write(src []float32) error {
	if cap(f.raw) < 4*len(src) {
		f.raw = make([]byte, 4*len(src))
	}
	raw := f.raw[:4*len(src)]
	for i, s := range src {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(s))
	}
	_, err := f.w.Write(raw)
	return err
}

func (f *floatWriter) flush() error { return f.w.Flush() }
