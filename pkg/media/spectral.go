package media

import "math"

// The soundtrack under speech is lowered per frequency, not as a whole: a
// short-time spectrum (1024 frames, 21 ms, every 512) is taken of the
// soundtrack, each frequency's bed level (music, ambience, room noise) is
// tracked as the minimum of its smoothed power over the last 1.5 s
// (speech pauses between words and syllables, the bed does not), and
// under speech each frequency is lowered by as much as it stands above
// that bed, down to the ducking depth at most. Where the original voice
// dominates (its harmonics, its formants, its sibilants) the soundtrack
// goes down like a duck would take it; where the bed dominates it stays,
// so that the music and the room go on through the whole line, including
// the tail of a source line that its dub does not cover.
const (
	specSize = 1024         // frames per spectrum
	specHop  = specSize / 2 // frames between spectra
	specBins = specSize/2 + 1
	// specSmooth smooths each frequency's power over about 35 ms before
	// its minimum is tracked.
	specSmooth = 0.7
	// The minimum is the least of specSubWindows sub-windows of
	// specSubHops spectra each: 6 × 28 × 10.7 ms ≈ 1.8 s, longer than a
	// spoken syllable or a held vowel, shorter than a change of scene.
	specSubHops, specSubWindows = 28, 6
	// specOverBed is how far (power ratio, 8 dB) a frequency may rise over
	// its tracked minimum and still count as bed: the minimum of a
	// smoothed noise-like power lies some 5 dB under its mean, and the bed
	// itself fluctuates.
	specOverBed = 6.3
)

// fft is a radix-2 complex FFT of a fixed size.
type fft struct {
	n   int
	rev []int32
	// twCos[h+k], twSin[h+k] are cos and sin of 2πk/(2h) for the stage
	// of butterflies h apart, k < h: each stage's twiddles in a row.
	twCos, twSin []float64
}

func newFFT(n int) *fft {
	f := &fft{n: n, rev: make([]int32, n), twCos: make([]float64, n), twSin: make([]float64, n)}
	bits := 0
	for 1<<bits < n {
		bits++
	}
	for i := range n {
		r := 0
		for b := range bits {
			if i&(1<<b) != 0 {
				r |= 1 << (bits - 1 - b)
			}
		}
		f.rev[i] = int32(r)
	}
	for h := 1; h < n; h <<= 1 {
		for k := range h {
			a := math.Pi * float64(k) / float64(h)
			f.twCos[h+k], f.twSin[h+k] = math.Cos(a), math.Sin(a)
		}
	}
	return f
}

// transform replaces re, im with their discrete Fourier transform
// (e^{-2πi…}), or with the inverse without the 1/n scaling.
func (f *fft) transform(re, im []float64, inverse bool) {
	n := f.n
	re, im = re[:n], im[:n]
	for i, r := range f.rev {
		if j := int(r); i < j {
			re[i], re[j] = re[j], re[i]
			im[i], im[j] = im[j], im[i]
		}
	}
	sign := -1.0
	if inverse {
		sign = 1
	}
	// The first two stages at once: their twiddles are 1 and ∓i.
	for j := 0; j < n; j += 4 {
		r0, i0, r1, i1 := re[j]+re[j+1], im[j]+im[j+1], re[j]-re[j+1], im[j]-im[j+1]
		r2, i2, r3, i3 := re[j+2]+re[j+3], im[j+2]+im[j+3], re[j+2]-re[j+3], im[j+2]-im[j+3]
		// r3 + i·i3 times ∓i (sign·i).
		t3r, t3i := -sign*i3, sign*r3
		re[j], im[j], re[j+2], im[j+2] = r0+r2, i0+i2, r0-r2, i0-i2
		re[j+1], im[j+1], re[j+3], im[j+3] = r1+t3r, i1+t3i, r1-t3r, i1-t3i
	}
	for size := 8; size <= n; size <<= 1 {
		half := size / 2
		// This stage's twiddles, e^{∓2πik/size}, k < half, lie at
		// tw[half:size] (cos) of f.twCos and f.twSin.
		wc, ws := f.twCos[half:size], f.twSin[half:size]
		for start := 0; start < n; start += size {
			ar, ai := re[start:start+half], im[start:start+half]
			br, bi := re[start+half:start+size], im[start+half:start+size]
			for k := range half {
				wr, wi := wc[k], sign*ws[k]
				tr := wr*br[k] - wi*bi[k]
				ti := wr*bi[k] + wi*br[k]
				br[k], bi[k] = ar[k]-tr, ai[k]-ti
				ar[k] += tr
				ai[k] += ti
			}
		}
	}
}

// bedTracker follows the bed level of each frequency of one signal.
type bedTracker struct {
	smooth, cur []float64 // smoothed power; minimum of the current sub-window
	subs        [][]float64
	bed         []float64 // least of subs and cur
	hops, sub   int
	started     bool
}

func newBedTracker() *bedTracker {
	t := &bedTracker{smooth: make([]float64, specBins), cur: make([]float64, specBins), bed: make([]float64, specBins)}
	for range specSubWindows {
		s := make([]float64, specBins)
		for k := range s {
			s[k] = math.Inf(1)
		}
		t.subs = append(t.subs, s)
	}
	for k := range t.cur {
		t.cur[k], t.bed[k] = math.Inf(1), math.Inf(1)
	}
	return t
}

// add takes the power of each frequency of the next spectrum.
func (t *bedTracker) add(power []float64) {
	for k, p := range power {
		s := specSmooth*t.smooth[k] + (1-specSmooth)*p
		if !t.started {
			s = p
		}
		t.smooth[k] = s
		t.cur[k] = min(t.cur[k], s)
		t.bed[k] = min(t.bed[k], s)
	}
	t.started = true
	if t.hops++; t.hops < specSubHops {
		return
	}
	// The current sub-window is complete: it replaces the oldest, and the
	// bed is the least over the sub-windows.
	t.hops = 0
	copy(t.subs[t.sub], t.cur)
	t.sub = (t.sub + 1) % specSubWindows
	for k := range t.bed {
		b := math.Inf(1)
		for _, s := range t.subs {
			b = min(b, s[k])
		}
		t.bed[k] = b
		t.cur[k] = math.Inf(1)
	}
}

// gains sets g[k] to the gain of frequency k of a spectrum of power
// power under speech: 1 where the power is within specOverBed of the bed,
// less by as much as it stands above it, low at the least; weight (0..1,
// how far into the ducking the spectrum is) blends it with 1. It reports
// whether any gain is under 1.
func (t *bedTracker) gains(power, g []float64, low, weight float64) bool {
	lowered := false
	for k, p := range power {
		g[k] = 1
		if limit := specOverBed * t.bed[k]; p > limit && weight > 0 {
			g[k], lowered = 1-weight*(1-max(math.Sqrt(limit/p), low)), true
		}
	}
	return lowered
}

// spectralDucker lowers the soundtrack under speech per frequency. It
// takes the soundtrack's interleaved frames and gives them back in the
// same order and alignment, processed. Mono: each spectrum is lowered by
// its own gains, two successive spectra sharing one complex FFT. Stereo
// (duck): the mid (L+R)/2 and side (L-R)/2 share one FFT and both take the
// mid's gains, the voice being in the mid. Stereo (reduce_center): the
// side is kept as it is (the stereo music beside the centred voice) and
// the mid is handled like a mono soundtrack.
type spectralDucker struct {
	ch       int
	keepSide bool
	low      float64
	weight   *ducker // 1 - its gain is how far into the ducking a time is
	fft      *fft
	window   []float64 // sqrt-Hann: analysis and synthesis
	bed      *bedTracker
	// in holds the padded mid and side from the first frame of the
	// current pair of spectra: specSize+specHop of them when full.
	mid, side []float64
	fill      int
	ola       [2][]float64 // overlap-add of the mid and the side, specSize+specHop
	re, im    []float64
	pa, pb    []float64 // powers of the two spectra of a transform
	ga, gb    []float64
	hop       int64 // index of the next spectrum
	out       []float32
	skip      int // output frames still to drop (the padding)
}

func newSpectralDucker(in DubInput, channels int, duckDB float64, keepSide bool) *spectralDucker {
	d := &spectralDucker{ch: channels, keepSide: keepSide || channels == 1, low: math.Pow(10, duckDB/20),
		weight: newDucker(in, math.Inf(-1)), fft: newFFT(specSize), window: make([]float64, specSize),
		bed: newBedTracker(), mid: make([]float64, specSize+specHop), side: make([]float64, specSize+specHop),
		re: make([]float64, specSize), im: make([]float64, specSize),
		pa: make([]float64, specBins), pb: make([]float64, specBins), ga: make([]float64, specBins), gb: make([]float64, specBins),
		fill: specHop, skip: specHop}
	for i := range d.window {
		d.window[i] = math.Sqrt(0.5 - 0.5*math.Cos(2*math.Pi*float64(i)/specSize))
	}
	for c := range d.ola {
		d.ola[c] = make([]float64, specSize+specHop)
	}
	return d
}

// process takes interleaved frames of the soundtrack (all of it, then
// nil to drain) and returns the processed frames ready so far; the slice
// is reused by the next call.
func (d *spectralDucker) process(frames []float32) []float32 {
	d.out = d.out[:0]
	ch, full := d.ch, len(d.mid)
	push := func(m, s float64) {
		d.mid[d.fill], d.side[d.fill] = m, s
		if d.fill++; d.fill == full {
			d.pair()
		}
	}
	if frames == nil { // the end: zeros until every real frame is out
		for range specSize + specHop {
			push(0, 0)
		}
		return d.out
	}
	for i := 0; i < len(frames); i += ch {
		if ch == 1 {
			push(float64(frames[i]), 0)
		} else {
			l, r := float64(frames[i]), float64(frames[i+1])
			push((l+r)/2, (l-r)/2)
		}
	}
	return d.out
}

// pair handles the two spectra starting at mid[0] and mid[specHop], then
// emits the 2·specHop frames they complete and keeps the last specHop.
func (d *spectralDucker) pair() {
	w0 := 1 - float64(d.weight.gain(d.hop*specHop))
	w1 := 1 - float64(d.weight.gain((d.hop+1)*specHop))
	if d.keepSide {
		d.transform(d.mid[:specSize], d.mid[specHop:], w0, w1, d.ola[0][:specSize], d.ola[0][specHop:], false)
	} else {
		for k, w := range []float64{w0, w1} {
			o := k * specHop
			d.transform(d.mid[o:o+specSize], d.side[o:o+specSize], w, w, d.ola[0][o:o+specSize], d.ola[1][o:o+specSize], true)
		}
	}
	d.hop += 2
	for i := range 2 * specHop {
		if d.skip > 0 {
			d.skip--
			continue
		}
		m := d.ola[0][i]
		s := d.side[i]
		if !d.keepSide {
			s = d.ola[1][i]
		}
		if d.ch == 1 {
			d.out = append(d.out, float32(m))
		} else {
			d.out = append(d.out, float32(m+s), float32(m-s))
		}
	}
	for c := range d.ola {
		copy(d.ola[c], d.ola[c][2*specHop:])
		clear(d.ola[c][specSize-specHop:])
	}
	copy(d.mid, d.mid[2*specHop:])
	copy(d.side, d.side[2*specHop:])
	d.fill = specSize - specHop
}

// transform runs real signals a and b (specSize frames each) through one
// complex FFT, lowers each as its weight says — b with a's gains when
// shared — and adds them, windowed, to outA and outB.
func (d *spectralDucker) transform(a, b []float64, wa, wb float64, outA, outB []float64, shared bool) {
	re, im, win := d.re, d.im, d.window
	for i := range specSize {
		re[i], im[i] = a[i]*win[i], b[i]*win[i]
	}
	d.fft.transform(re, im, false)
	// The spectra of a and b: A_k = (Z_k + conj Z_{n-k})/2, B_k = (Z_k - conj Z_{n-k})/2i.
	for k := range specBins {
		j := (specSize - k) & (specSize - 1)
		ar, ai := (re[k]+re[j])/2, (im[k]-im[j])/2
		br, bi := (im[k]+im[j])/2, (re[j]-re[k])/2
		d.pa[k], d.pb[k] = ar*ar+ai*ai, br*br+bi*bi
	}
	d.bed.add(d.pa)
	if !shared {
		d.bed.add(d.pb)
	}
	lowered := false
	if wa > 0 || wb > 0 {
		lowered = d.bed.gains(d.pa, d.ga, d.low, wa)
		if shared {
			copy(d.gb, d.ga)
		} else {
			// b's gains from the bed as it was before b's spectrum was
			// added would be more exact; 11 ms later makes no audible
			// difference.
			lowered = d.bed.gains(d.pb, d.gb, d.low, wb) || lowered
		}
	}
	if !lowered {
		// Nothing lowered: the windowed input is its own resynthesis.
		for i := range specSize {
			w2 := win[i] * win[i]
			outA[i] += a[i] * w2
			outB[i] += b[i] * w2
		}
		return
	}
	for k := range specBins {
		j := (specSize - k) & (specSize - 1)
		ar, ai := (re[k]+re[j])/2, (im[k]-im[j])/2
		br, bi := (im[k]+im[j])/2, (re[j]-re[k])/2
		ga, gb := d.ga[k], d.gb[k]
		re[k], im[k] = ga*ar-gb*bi, ga*ai+gb*br
		re[j], im[j] = ga*ar+gb*bi, gb*br-ga*ai
	}
	d.fft.transform(re, im, true)
	for i := range specSize {
		w := win[i] / specSize
		outA[i] += re[i] * w
		outB[i] += im[i] * w
	}
}
