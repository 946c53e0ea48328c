package speech

import (
	"math"
	"math/cmplx"
	"slices"
)

// The front end of pocketsphinx's en-us model (its feat.params) at 16 kHz:
// 25.625 ms frames every 10 ms, pre-emphasis 0.97, a Hamming window, a
// 512-point FFT, 25 mel filters of unit area from 130 to 6800 Hz, a DCT to
// 13 cepstra and a lifter of 22.
const (
	feRate    = 16000
	feShift   = 160
	feWindow  = 410
	feFFT     = 512
	feFilters = 25
	feCepstra = 13
	feLowHz   = 130
	feHighHz  = 6800
	feLifter  = 22
)

// melBank is the front end's triangular filters, filter i weighing the
// FFT bins from[i] on by weights[i].
type melBank struct {
	from    [feFilters]int
	weights [feFilters][]float64
	fft     [feFFT]complex128 // a frame's spectrum, reused
}

func mel(hz float64) float64   { return 2595 * math.Log10(1+hz/700) }
func melInv(m float64) float64 { return 700 * (math.Pow(10, m/2595) - 1) }

// newMelBank builds the filters as sphinxbase does (round_filters,
// unit_area): edges rounded to FFT bins, each filter's area 1.
func newMelBank() *melBank {
	b := &melBank{}
	lo, hi := mel(feLowHz), mel(feHighHz)
	step := (hi - lo) / (feFilters + 1)
	binHz := float64(feRate) / feFFT
	for i := range feFilters {
		var f [3]float64
		for j := range f {
			f[j] = math.Floor(melInv(lo+float64(i+j)*step)/binHz+0.5) * binHz
		}
		b.from[i] = -1
		for k := 0; k <= feFFT/2; k++ {
			hz := float64(k) * binHz
			if hz < f[0] || hz > f[2] {
				continue
			}
			up := (hz - f[0]) / (f[1] - f[0]) * 2 / (f[2] - f[0])
			down := (f[2] - hz) / (f[2] - f[1]) * 2 / (f[2] - f[0])
			if b.from[i] < 0 {
				b.from[i] = k
			}
			b.weights[i] = append(b.weights[i], min(up, down))
		}
	}
	return b
}

// cepstra computes the 13 cepstra of one frame of feWindow samples
// (prev is the sample before it, for the pre-emphasis) and its log energy.
func (b *melBank) cepstra(frame []int16, prev int16) ([feCepstra]float64, float64) {
	buf := b.fft[:]
	clear(buf)
	energy := 0.0
	for i, s := range frame {
		p := float64(prev)
		if i > 0 {
			p = float64(frame[i-1])
		}
		v := (float64(s) - 0.97*p) * (0.54 - 0.46*math.Cos(2*math.Pi*float64(i)/float64(feWindow-1)))
		buf[i] = complex(v, 0)
		energy += v * v
	}
	fft(buf)
	var logspec [feFilters]float64
	for i := range feFilters {
		sum := 0.0
		for j, w := range b.weights[i] {
			c := buf[b.from[i]+j]
			sum += w * (real(c)*real(c) + imag(c)*imag(c))
		}
		logspec[i] = math.Log(max(sum, 1e-5))
	}
	var cep [feCepstra]float64
	for i := range feCepstra {
		s := 0.0
		for j, l := range logspec {
			s += l * math.Cos(math.Pi*float64(i)*(float64(j)+0.5)/feFilters)
		}
		if i == 0 {
			cep[i] = s * math.Sqrt(1.0/feFilters)
			continue
		}
		cep[i] = s * math.Sqrt(2.0/feFilters) * (1 + feLifter/2*math.Sin(math.Pi*float64(i)/feLifter))
	}
	return cep, math.Log(max(energy, 1))
}

// fft transforms x in place (its length a power of two).
func fft(x []complex128) {
	n := len(x)
	for i, j := 1, 0; i < n; i++ {
		bit := n >> 1
		for ; j&bit != 0; bit >>= 1 {
			j ^= bit
		}
		j |= bit
		if i < j {
			x[i], x[j] = x[j], x[i]
		}
	}
	for size := 2; size <= n; size <<= 1 {
		w := cmplx.Exp(complex(0, -2*math.Pi/float64(size)))
		for start := 0; start < n; start += size {
			wk := complex(1, 0)
			for k := range size / 2 {
				a, b := x[start+k], x[start+k+size/2]*wk
				x[start+k], x[start+k+size/2] = a+b, a-b
				wk *= w
			}
		}
	}
}

// c0Offset is what cepstralMean's c0 exceeds the mean pocketsphinx keeps
// (its log, cmn_live.c "Update to"): 10.2 on two_cities, 11.4 on jfk (its
// noise removal and voice activity detection, not done here, lower it).
const c0Offset = 10

// speechMargin is how far below the loudest frames (in natural log of
// energy) a frame still counts as speech for the cepstral mean.
const speechMargin = 4.0

// cepstralMean estimates the mean of the cepstra pocketsphinx normalises
// by over the speech in samples (16 kHz mono): the frames whose energy is
// within speechMargin of the loudest tenth's, n of them.
func cepstralMean(samples []int16) (mean []float64, n int) {
	b := newMelBank()
	var ceps [][feCepstra]float64
	var energies []float64
	for at := 0; at+feWindow <= len(samples); at += feShift {
		var prev int16
		if at > 0 {
			prev = samples[at-1]
		}
		c, e := b.cepstra(samples[at:at+feWindow], prev)
		ceps = append(ceps, c)
		energies = append(energies, e)
	}
	if len(ceps) == 0 {
		return nil, 0
	}
	sorted := slices.Sorted(slices.Values(energies))
	loud := sorted[len(sorted)*9/10]
	mean = make([]float64, feCepstra)
	for i, c := range ceps {
		if energies[i] < loud-speechMargin {
			continue
		}
		for j := range mean {
			mean[j] += c[j]
		}
		n++
	}
	for j := range mean {
		mean[j] /= float64(n)
	}
	mean[0] -= c0Offset
	return mean, n
}
