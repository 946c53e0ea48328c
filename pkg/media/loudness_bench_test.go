package media

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

// sampleMeter is the loudness meter as it was before it kept its state in
// locals: a biquad struct stepped sample by sample. It is the baseline
// that TestLoudnessMeterSameAsSampleBySample and BenchmarkLoudnessMeter
// compare loudnessMeter.add with.
type sampleMeter struct {
	channels int
	filters  [][2]biquad
	sum      float64
	n        int
	quarters []float64
}

type biquad struct {
	b0, b1, b2, a1, a2 float64
	s1, s2             float64
}

func (q *biquad) step(x float64) float64 {
	y := q.b0*x + q.s1
	q.s1 = q.b1*x - q.a1*y + q.s2
	q.s2 = q.b2*x - q.a2*y
	return y
}

func newSampleMeter(channels int) *sampleMeter {
	m := &sampleMeter{channels: channels}
	for range channels {
		m.filters = append(m.filters, [2]biquad{
			{b0: 1.53512485958697, b1: -2.69169618940638, b2: 1.19839281085285, a1: -1.69065929318241, a2: 0.73248077421585},
			{b0: 1, b1: -2, b2: 1, a1: -1.99004745483398, a2: 0.99007225036621},
		})
	}
	return m
}

func (m *sampleMeter) add(samples []float32) {
	weight := 1.0
	if m.channels == 1 {
		weight = 2
	}
	for i := 0; i < len(samples); i += m.channels {
		for c := range m.channels {
			f := &m.filters[c]
			y := f[1].step(f[0].step(float64(samples[i+c])))
			m.sum += weight * y * y
		}
		if m.n++; m.n == meterStep {
			m.quarters = append(m.quarters, m.sum/meterStep)
			m.sum, m.n = 0, 0
		}
	}
}

// meterNoise is seconds of loud noise with quiet stretches, interleaved.
func meterNoise(channels int, seconds float64) []float32 {
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, int(seconds*mixRate)*channels)
	for i := range x {
		level := float32(0.5)
		if i/channels/mixRate%3 == 2 {
			level = 0.001
		}
		x[i] = level * (2*rng.Float32() - 1)
	}
	return x
}

// TestLoudnessMeterSameAsSampleBySample feeds the same audio, in blocks
// of odd sizes, to the meter and to the sample-by-sample baseline: every
// 100 ms mean square is the same (to the bit on amd64, where Go fuses no
// multiply-add), mono and stereo.
func TestLoudnessMeterSameAsSampleBySample(t *testing.T) {
	for _, channels := range []int{1, 2} {
		x := meterNoise(channels, 7.3)
		m, old := newLoudnessMeter(channels, int64(len(x)/channels)), newSampleMeter(channels)
		for at, size := 0, 1; at < len(x); at, size = at+size*channels, size*3%7919+1 {
			block := x[at:min(len(x), at+size*channels)]
			m.add(block)
			old.add(block)
		}
		if len(m.quarters) != len(old.quarters) || m.n != old.n {
			t.Fatalf("%d channels: %d blocks (+%d frames), baseline %d (+%d)", channels, len(m.quarters), m.n, len(old.quarters), old.n)
		}
		for i, q := range m.quarters {
			same := q == old.quarters[i]
			if runtime.GOARCH != "amd64" {
				same = math.Abs(q-old.quarters[i]) <= 1e-12*old.quarters[i]
			}
			if !same {
				t.Fatalf("%d channels, block %d: mean square %v, baseline %v", channels, i, q, old.quarters[i])
			}
		}
		if math.IsInf(m.integrated(), 0) {
			t.Fatalf("%d channels: no loudness measured", channels)
		}
	}
}

// BenchmarkLoudnessMeter measures 10 s of audio in 100 ms blocks (as
// mixPass does) with the meter and with the sample-by-sample baseline.
func BenchmarkLoudnessMeter(b *testing.B) {
	for _, channels := range []int{1, 2} {
		x := meterNoise(channels, 10)
		block := mixBlock * channels
		for _, way := range []struct {
			name string
			add  func() func([]float32)
		}{
			{"sample-by-sample", func() func([]float32) { return newSampleMeter(channels).add }},
			{"now", func() func([]float32) { return newLoudnessMeter(channels, int64(len(x)/channels)).add }},
		} {
			b.Run(fmt.Sprintf("%dch/%s", channels, way.name), func(b *testing.B) {
				b.SetBytes(int64(4 * len(x)))
				for b.Loop() {
					add := way.add()
					for at := 0; at < len(x); at += block {
						add(x[at:min(len(x), at+block)])
					}
				}
			})
		}
	}
}
