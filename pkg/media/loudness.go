package media

import "math"

// ITU-R BS.1770's K-weighting filter at 48 kHz: the head's high shelf,
// then the high pass (b0 = 1, b1 = -2, b2 = 1), two second-order sections
// in direct form II transposed.
const (
	shelfB0, shelfB1, shelfB2 = 1.53512485958697, -2.69169618940638, 1.19839281085285
	shelfA1, shelfA2          = -1.69065929318241, 0.73248077421585
	passA1, passA2            = -1.99004745483398, 0.99007225036621
)

// kState is one channel's K-weighting state: s1, s2 of the shelf, then of
// the high pass.
type kState [4]float64

// kStep filters x through both sections from state s1..s4 and returns the
// output and the new state (scalars, so that the loops calling it keep the
// state in registers).
func kStep(x, s1, s2, s3, s4 float64) (y, n1, n2, n3, n4 float64) {
	y0 := shelfB0*x + s1
	n1 = shelfB1*x - shelfA1*y0 + s2
	n2 = shelfB2*x - shelfA2*y0
	y = y0 + s3
	n3 = -2*y0 - passA1*y + s4
	n4 = y0 - passA2*y
	return y, n1, n2, n3, n4
}

// loudnessMeter measures the integrated loudness (EBU R128, ITU-R
// BS.1770-4) of interleaved 48 kHz audio of one or two channels: K-weighted
// mean squares over 400 ms blocks every 100 ms, gated at -70 LUFS and then
// 10 LU under the mean. A mono stream counts as dual mono (weight 2), as
// ebur128's dualmono does. It keeps one number per 100 ms.
type loudnessMeter struct {
	channels int
	filters  []kState
	sum      float64   // weighted sum of squares of the current 100 ms
	n        int       // frames in the current 100 ms
	quarters []float64 // mean squares of each complete 100 ms
}

const meterStep = mixRate / 10 // 100 ms of frames

// newLoudnessMeter returns a meter for about frames frames.
func newLoudnessMeter(channels int, frames int64) *loudnessMeter {
	return &loudnessMeter{channels: channels, filters: make([]kState, channels),
		quarters: make([]float64, 0, frames/meterStep+1)}
}

// add measures frames of interleaved samples, up to 100 ms at a time
// through a loop that keeps the filters' state and the sum in locals: it
// touches no memory but the samples, which keeps it cheap, with the race
// detector too. The sums are in the order of the frames, so the result
// does not depend on how the audio is cut into calls.
func (m *loudnessMeter) add(samples []float32) {
	for start := 0; start < len(samples); {
		frames := min(meterStep-m.n, (len(samples)-start)/m.channels)
		if frames == 0 {
			return
		}
		end := start + frames*m.channels
		if m.channels == 1 {
			m.sum = kMono(&m.filters[0], samples[start:end], m.sum)
		} else {
			m.sum = kStereo(&m.filters[0], &m.filters[1], samples[start:end], m.sum)
		}
		if m.n += frames; m.n == meterStep {
			m.quarters = append(m.quarters, m.sum/meterStep)
			m.sum, m.n = 0, 0
		}
		start = end
	}
}

// kMono adds to sum the squares of the K-weighted mono samples x, counted
// twice (dual mono).
func kMono(st *kState, x []float32, sum float64) float64 {
	s1, s2, s3, s4 := st[0], st[1], st[2], st[3]
	var y float64
	for _, v := range x {
		y, s1, s2, s3, s4 = kStep(float64(v), s1, s2, s3, s4)
		sum += 2 * y * y
	}
	*st = kState{s1, s2, s3, s4}
	return sum
}

// kStereo adds to sum the squares of the K-weighted interleaved stereo
// samples x, left through l and right through r.
func kStereo(l, r *kState, x []float32, sum float64) float64 {
	l1, l2, l3, l4 := l[0], l[1], l[2], l[3]
	r1, r2, r3, r4 := r[0], r[1], r[2], r[3]
	var y float64
	for i := 0; i+1 < len(x); i += 2 {
		y, l1, l2, l3, l4 = kStep(float64(x[i]), l1, l2, l3, l4)
		sum += y * y
		y, r1, r2, r3, r4 = kStep(float64(x[i+1]), r1, r2, r3, r4)
		sum += y * y
	}
	*l, *r = kState{l1, l2, l3, l4}, kState{r1, r2, r3, r4}
	return sum
}

// integrated returns the gated loudness in LUFS; -Inf when the audio is
// silent.
func (m *loudnessMeter) integrated() float64 {
	gated := func(gate float64) float64 { // mean of the blocks over gate
		sum, n := 0.0, 0
		for i := 3; i < len(m.quarters); i++ {
			z := (m.quarters[i-3] + m.quarters[i-2] + m.quarters[i-1] + m.quarters[i]) / 4
			if lufs(z) > gate {
				sum, n = sum+z, n+1
			}
		}
		if n == 0 {
			return 0
		}
		return sum / float64(n)
	}
	absolute := gated(-70)
	if absolute == 0 {
		return math.Inf(-1)
	}
	return lufs(gated(max(lufs(absolute)-10, -70)))
}

func lufs(z float64) float64 { return -0.691 + 10*math.Log10(z) }

// gainTo is the gain in dB (rounded to 1/100) that brings a measured
// loudness to target: none for silence, at most maxGainDB.
func gainTo(measured, target float64) float64 {
	if !(measured > -70) { // ebur128's floor: silence, nothing to normalize
		return 0
	}
	return math.Round(min(target-measured, maxGainDB)*100) / 100
}

// limiter is a look-ahead peak limiter for interleaved audio: it delays
// the signal by look-1 frames and lowers the gain smoothly before a peak
// so that no sample leaves it above limit. The gain at each frame is the
// mean over look frames of the minimum, over the next look frames, of the
// gain each frame needs (limit over its peak): every term of that mean is
// at most the frame's own need, so the frame never overshoots, and the
// gain falls as a ramp over look frames. It rises again with the release
// time constant. The channels share the gain.
type limiter struct {
	channels, look int
	limit, rise    float64
	pushed         int64     // frames pushed so far
	slot           int       // pushed % look: where the next frame goes in delay
	delay          []float32 // the last look frames pushed, a ring
	need           []float64 // ring of the last look minima
	needSum        float64
	window         slidingMin // of the needs of the last look frames
	gain           float64
	calm           int64 // frames pushed since the last one over the limit
}

// slidingMin is the minimum of a sliding window: a monotonic deque in a
// ring of fixed size.
type slidingMin struct {
	at          []int64
	value       []float64
	head, count int
}

func newSlidingMin(size int) slidingMin {
	return slidingMin{at: make([]int64, size), value: make([]float64, size)}
}

// reset leaves only value 1 at index at.
func (m *slidingMin) reset(at int64) {
	m.head, m.count, m.at[0], m.value[0] = 0, 1, at, 1
}

// push adds value at index at, drops what is at or before expired, and
// returns the minimum of what is left.
func (m *slidingMin) push(at int64, value float64, expired int64) float64 {
	n := len(m.at)
	for m.count > 0 && m.value[(m.head+m.count-1)%n] >= value {
		m.count--
	}
	if m.count == n { // cannot happen with expired = at - size
		m.head, m.count = (m.head+1)%n, m.count-1
	}
	tail := (m.head + m.count) % n
	m.at[tail], m.value[tail] = at, value
	m.count++
	for m.at[m.head] <= expired {
		m.head, m.count = (m.head+1)%n, m.count-1
	}
	return m.value[m.head]
}

func newLimiter(channels int, limit float64, lookFrames int, releaseFrames float64) *limiter {
	l := &limiter{channels: channels, look: lookFrames, limit: limit, rise: 1 - math.Exp(-1/releaseFrames), gain: 1,
		delay: make([]float32, lookFrames*channels), need: make([]float64, lookFrames), needSum: float64(lookFrames),
		window: newSlidingMin(lookFrames)}
	for i := range l.need {
		l.need[i] = 1
	}
	// look-1 frames of silence first, so that the first real frame's gain
	// is the mean of proper minima.
	l.process(make([]float32, (lookFrames-1)*channels), nil)
	return l
}

// process takes the interleaved frames of in and writes to out the frames
// look-1 frames earlier, limited; it returns how many it wrote (fewer
// than it took at the start). out must have room for len(in) samples;
// nil discards them.
func (l *limiter) process(in, out []float32) int {
	ch, look, written := l.channels, int64(l.look), 0
	for i := 0; i < len(in); i += ch {
		frame := in[i : i+ch]
		peak := float32(0)
		for _, s := range frame {
			peak = max(peak, s, -s)
		}
		need := 1.0
		if float64(peak) > l.limit {
			need = l.limit / float64(peak)
		}
		k, slot := l.pushed, l.slot
		// next is the slot of frame k-look+1, the one that leaves the
		// delay line now.
		next := slot + 1
		if next == l.look {
			next = 0
		}
		l.pushed, l.slot = k+1, next
		emit := out != nil && k >= 2*(look-1)
		if need < 1 {
			l.calm = 0
		} else if l.calm++; l.calm >= 2*look && l.gain == 1 {
			// Nothing to limit in the window nor in the minima averaged:
			// pass the frame leaving the delay line as it is.
			l.window.reset(k)
			copy(l.delay[slot*ch:(slot+1)*ch], frame)
			if emit {
				copy(out[written:written+ch], l.delay[next*ch:(next+1)*ch])
				written += ch
			}
			continue
		} else if l.calm == 2*look {
			l.needSum = float64(look) // every minimum is 1: drop the sum's rounding
		}
		least := l.window.push(k, need, k-look)
		// The window is complete for frame k-look+1.
		l.needSum += least - l.need[slot]
		l.need[slot] = least
		if target := l.needSum / float64(look); target < l.gain {
			l.gain = target
		} else if l.gain += (target - l.gain) * l.rise; target-l.gain < 1e-5 {
			l.gain = target // within 0.0001 dB: done rising
		}
		copy(l.delay[slot*ch:(slot+1)*ch], frame)
		if !emit {
			continue
		}
		g := float32(l.gain)
		for c, s := range l.delay[next*ch : (next+1)*ch] {
			out[written+c] = min(max(s*g, -float32(l.limit)), float32(l.limit))
		}
		written += ch
	}
	return written / ch
}
