package speaker

import (
	"math"
	"slices"
	"strconv"
)

// MinDistance is how far apart, in semitones of pitch (brightness counts
// half), two speakers' typical voices must be to be told apart: one
// reader's segments were measured up to 5.5 semitones apart, a male and a
// female voice lie 7 or more apart. Speakers closer than this share a
// voice.
const MinDistance = 7.0

// Turn is the speaker of one span.
type Turn struct {
	// Speaker is "S1", "S2", ... in order of first appearance.
	Speaker string
	// PitchHz is the speaker's median pitch (0 when no span of the
	// speaker had one).
	PitchHz float64
}

// Cluster groups the spans' voices into at most maxSpeakers speakers and
// returns each span's speaker. Spans without a pitch join the speaker of
// the nearest span (in order) that has one. The most speakers whose
// centres all lie MinDistance apart win, and, with four or more spans, a
// speaker needs two of them.
func Cluster(voices []Voice, maxSpeakers int) []Turn {
	var points [][2]float64
	var at []int
	for i, v := range voices {
		if v.PitchHz > 0 {
			points = append(points, point(v))
			at = append(at, i)
		}
	}
	labels := make([]int, len(points))
	for k := 2; k <= min(maxSpeakers, len(points)); k++ {
		l, centres := kmeans(points, k)
		if !apart(centres) || len(points) >= 4 && smallest(l, k) < 2 {
			break
		}
		labels = l
	}
	label := make([]int, len(voices))
	for i := range label {
		label[i] = -1
	}
	for j, i := range at {
		label[i] = labels[j]
	}
	fillGaps(label)
	return name(label, voices)
}

// smallest returns the size of the smallest of k clusters.
func smallest(labels []int, k int) int {
	count := make([]int, k)
	for _, l := range labels {
		count[l]++
	}
	return slices.Min(count)
}

// point places a voice in semitones: pitch, and brightness at half weight.
func point(v Voice) [2]float64 {
	b := 0.0
	if v.BrightnessHz > 0 {
		b = 6 * math.Log2(v.BrightnessHz/1000)
	}
	return [2]float64{12 * math.Log2(v.PitchHz/100), b}
}

func dist(a, b [2]float64) float64 { return math.Hypot(a[0]-b[0], a[1]-b[1]) }

// apart reports whether every two centres lie MinDistance apart.
func apart(centres [][2]float64) bool {
	for i := range centres {
		for j := i + 1; j < len(centres); j++ {
			if dist(centres[i], centres[j]) < MinDistance {
				return false
			}
		}
	}
	return true
}

// kmeans clusters points into k groups, deterministically: the first centre
// is the lowest voice, each next one the point farthest from those chosen.
func kmeans(points [][2]float64, k int) ([]int, [][2]float64) {
	first := 0
	for i, p := range points {
		if p[0] < points[first][0] {
			first = i
		}
	}
	centres := [][2]float64{points[first]}
	for len(centres) < k {
		far, farD := 0, -1.0
		for i, p := range points {
			d := math.Inf(1)
			for _, c := range centres {
				d = math.Min(d, dist(p, c))
			}
			if d > farD {
				far, farD = i, d
			}
		}
		centres = append(centres, points[far])
	}
	labels := make([]int, len(points))
	for range 50 {
		for i, p := range points {
			labels[i] = nearest(p, centres)
		}
		next := make([][2]float64, k)
		count := make([]int, k)
		for i, p := range points {
			next[labels[i]][0] += p[0]
			next[labels[i]][1] += p[1]
			count[labels[i]]++
		}
		for c := range next {
			if count[c] > 0 {
				next[c] = [2]float64{next[c][0] / float64(count[c]), next[c][1] / float64(count[c])}
			} else {
				next[c] = centres[c]
			}
		}
		if slices.Equal(next, centres) {
			break
		}
		centres = next
	}
	return labels, centres
}

func nearest(p [2]float64, centres [][2]float64) int {
	best := 0
	for c := range centres {
		if dist(p, centres[c]) < dist(p, centres[best]) {
			best = c
		}
	}
	return best
}

// fillGaps gives each unlabelled (-1) span the label of the nearest
// labelled one, the earlier one on a tie; 0 when none is labelled.
func fillGaps(label []int) {
	orig := slices.Clone(label)
	for i := range label {
		if orig[i] >= 0 {
			continue
		}
		label[i] = 0
		for d := 1; d < len(label); d++ {
			if i-d >= 0 && orig[i-d] >= 0 {
				label[i] = orig[i-d]
				break
			}
			if i+d < len(label) && orig[i+d] >= 0 {
				label[i] = orig[i+d]
				break
			}
		}
	}
}

// name turns cluster labels into speakers named in order of appearance,
// each with its median pitch.
func name(label []int, voices []Voice) []Turn {
	names := map[int]string{}
	pitches := map[int][]float64{}
	for i, l := range label {
		if _, ok := names[l]; !ok {
			names[l] = "S" + strconv.Itoa(len(names)+1)
		}
		if voices[i].PitchHz > 0 {
			pitches[l] = append(pitches[l], voices[i].PitchHz)
		}
	}
	out := make([]Turn, len(label))
	for i, l := range label {
		out[i] = Turn{Speaker: names[l]}
		if p := pitches[l]; len(p) > 0 {
			out[i].PitchHz = median(p)
		}
	}
	return out
}
