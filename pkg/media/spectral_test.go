package media

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestFFTMatchesTheDFT(t *testing.T) {
	const n = 64
	f := newFFT(n)
	rng := rand.New(rand.NewPCG(1, 2))
	re, im := make([]float64, n), make([]float64, n)
	x := make([]complex128, n)
	for i := range n {
		re[i], im[i] = rng.NormFloat64(), rng.NormFloat64()
		x[i] = complex(re[i], im[i])
	}
	f.transform(re, im, false)
	for k := range n {
		var want complex128
		for i, v := range x {
			a := -2 * math.Pi * float64(k*i) / n
			want += v * complex(math.Cos(a), math.Sin(a))
		}
		if math.Abs(real(want)-re[k]) > 1e-9 || math.Abs(imag(want)-im[k]) > 1e-9 {
			t.Fatalf("bin %d: %v, want %v", k, complex(re[k], im[k]), want)
		}
	}
	f.transform(re, im, true)
	for i, v := range x {
		if math.Abs(real(v)-re[i]/n) > 1e-9 || math.Abs(imag(v)-im[i]/n) > 1e-9 {
			t.Fatalf("inverse, sample %d: %v, want %v", i, complex(re[i]/n, im[i]/n), v)
		}
	}
}

// TestSpectralDuckerPassesWhatItDoesNotDuck: with nobody speaking the
// spectral ducker gives the soundtrack back as it took it, frame for
// frame, mono and stereo, whatever the sizes of the pieces it is fed.
func TestSpectralDuckerPassesWhatItDoesNotDuck(t *testing.T) {
	for _, tc := range []struct {
		ch       int
		keepSide bool
	}{{1, false}, {2, false}, {2, true}} {
		rng := rand.New(rand.NewPCG(3, 4))
		const frames = 20011
		in := make([]float32, frames*tc.ch)
		for i := range in {
			in[i] = float32(rng.NormFloat64() * 0.1)
		}
		d := newSpectralDucker(DubInput{}, tc.ch, -18, tc.keepSide)
		var out []float32
		for at := 0; at < len(in); {
			k := min((1+rng.IntN(3000))*tc.ch, len(in)-at)
			out = append(out, d.process(in[at:at+k])...)
			at += k
		}
		out = append(out, d.process(nil)...)
		if len(out) < len(in) {
			t.Fatalf("%d channels: %d samples out of %d", tc.ch, len(out), len(in))
		}
		for i := range in {
			if math.Abs(float64(out[i]-in[i])) > 1e-6 {
				t.Fatalf("%d channels, keep side %v: sample %d is %v, was %v", tc.ch, tc.keepSide, i, out[i], in[i])
			}
		}
	}
}

// TestSpectralDuckerKeepsTheBedAndLowersTheVoice: under speech, a steady
// noise bed stays within 1 dB while a loud tone burst over it (a voiced
// sound) goes down by more than 12 dB.
func TestSpectralDuckerKeepsTheBedAndLowersTheVoice(t *testing.T) {
	const frames = 6 * mixRate
	rng := rand.New(rand.NewPCG(5, 6))
	bed, voice := make([]float32, frames), make([]float32, frames)
	for i := range frames {
		bed[i] = float32(rng.NormFloat64() * 0.01)
		if i >= 3*mixRate && i < 4*mixRate {
			voice[i] = float32(0.3 * math.Sin(2*math.Pi*440*float64(i)/mixRate))
		}
	}
	in := make([]float32, frames)
	for i := range in {
		in[i] = bed[i] + voice[i]
	}
	d := newSpectralDucker(DubInput{Speech: []Span{{2000, 5000}}}, 1, -18, false)
	out := append(d.process(in), d.process(nil)...)[:frames]
	rms := func(x []float32, from, to float64) float64 {
		s := 0.0
		for _, v := range x[int(from*mixRate):int(to*mixRate)] {
			s += float64(v) * float64(v)
		}
		return 10 * math.Log10(s/((to-from)*mixRate))
	}
	// The bed alone under speech (2.2–2.9 s, 4.1–4.9 s), then with the tone.
	for _, w := range [][2]float64{{2.2, 2.9}, {4.1, 4.9}} {
		if o, b := rms(out, w[0], w[1]), rms(bed, w[0], w[1]); math.Abs(o-b) > 1 {
			t.Errorf("%.1f–%.1f s: bed at %.1f dB, was %.1f dB", w[0], w[1], o, b)
		}
	}
	if o, v := rms(out, 3.1, 3.9), rms(in, 3.1, 3.9); v-o < 12 {
		t.Errorf("3.1–3.9 s: the tone over the bed is at %.1f dB, was %.1f dB: want 12 dB lower", o, v)
	}
}

// BenchmarkSpectralDucker: one minute of mono soundtrack, all of it under
// speech.
func BenchmarkSpectralDucker(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 8))
	in := make([]float32, mixBlock)
	for i := range in {
		in[i] = float32(rng.NormFloat64() * 0.1)
	}
	for b.Loop() {
		d := newSpectralDucker(DubInput{Speech: []Span{{0, 60_000}}}, 1, -18, false)
		for range 600 {
			d.process(in)
		}
	}
}

func BenchmarkFFT1024(b *testing.B) {
	f := newFFT(specSize)
	re, im := make([]float64, specSize), make([]float64, specSize)
	for i := range re {
		re[i] = float64(i % 7)
	}
	for b.Loop() {
		f.transform(re, im, false)
	}
}
