package speaker

import (
	"math"
	"strconv"
)

// Extend gives speakers to spans transcribed after others were given
// theirs, so that synthesis can start before the whole recording is
// transcribed. voices and speakers are every span known so far, in time
// order; a span's speaker is "" when it has none yet. It returns every
// span's speaker: the given ones unchanged.
//
// With no speaker given yet it is Cluster. Otherwise a new span with a
// pitch joins the nearest known speaker (whose centre is the mean of its
// spans' points) unless it lies MinDistance or more from every one; the
// spans that far are clustered among themselves as Cluster does, into at
// most maxSpeakers less the known ones, and a group of two or more whose
// centre lies MinDistance from every known centre becomes a new speaker
// (named on from the known ones); the rest join their nearest known
// speaker. A new span without a pitch takes the speaker of the nearest
// span in order that has one.
func Extend(voices []Voice, speakers []string, maxSpeakers int) []Turn {
	ids := map[string]int{} // known speaker → label
	var names []string
	label := make([]int, len(voices))
	for i, s := range speakers {
		label[i] = -1
		if s == "" {
			continue
		}
		if _, ok := ids[s]; !ok {
			ids[s] = len(names)
			names = append(names, s)
		}
		label[i] = ids[s]
	}
	if len(names) == 0 {
		return Cluster(voices, maxSpeakers)
	}
	centres := centresOf(voices, label, len(names))
	var far [][2]float64
	var farAt []int
	for i, v := range voices {
		if label[i] >= 0 || v.PitchHz <= 0 {
			continue
		}
		p := point(v)
		if c, d := nearestKnown(p, centres); d < MinDistance {
			label[i] = c
			continue
		}
		far, farAt = append(far, p), append(farAt, i)
	}
	known := len(names)
	for j, l := range newSpeakers(far, centres, maxSpeakers-known) {
		i := farAt[j]
		if l >= 0 {
			label[i] = known + l
		} else {
			label[i], _ = nearestKnown(far[j], centres)
		}
	}
	fillGaps(label)
	return nameOn(label, voices, names)
}

// centresOf returns the mean point of each of k labels' spans with a
// pitch (NaN for a label with none).
func centresOf(voices []Voice, label []int, k int) [][2]float64 {
	sum := make([][2]float64, k)
	count := make([]int, k)
	for i, v := range voices {
		if l := label[i]; l >= 0 && v.PitchHz > 0 {
			p := point(v)
			sum[l][0] += p[0]
			sum[l][1] += p[1]
			count[l]++
		}
	}
	for l := range sum {
		if count[l] == 0 {
			sum[l] = [2]float64{math.NaN(), math.NaN()}
			continue
		}
		sum[l] = [2]float64{sum[l][0] / float64(count[l]), sum[l][1] / float64(count[l])}
	}
	return sum
}

// nearestKnown returns the label of the centre nearest to p and its
// distance (label 0 and +Inf when no centre is known).
func nearestKnown(p [2]float64, centres [][2]float64) (int, float64) {
	best, bestD := 0, math.Inf(1)
	for c, centre := range centres {
		if d := dist(p, centre); d < bestD { // NaN never compares less
			best, bestD = c, d
		}
	}
	return best, bestD
}

// newSpeakers clusters the points far from every known centre into at
// most room new speakers and returns each point's new label, or -1 for a
// point that makes none: its group has one point, or lies nearer than
// MinDistance to a known centre.
func newSpeakers(points, known [][2]float64, room int) []int {
	out := make([]int, len(points))
	for i := range out {
		out[i] = -1
	}
	if room < 1 || len(points) < 2 {
		return out
	}
	labels := make([]int, len(points))
	k := 1
	for n := 2; n <= min(room, len(points)); n++ {
		l, centres := kmeans(points, n)
		if !apart(centres) || smallest(l, n) < 2 {
			break
		}
		labels, k = l, n
	}
	mine := map[int]int{} // cluster → new label
	for c, centre := range centresOfPoints(points, labels, k) {
		if count(labels, c) < 2 {
			continue
		}
		if _, d := nearestKnown(centre, known); d < MinDistance {
			continue
		}
		mine[c] = len(mine)
	}
	for i, l := range labels {
		if n, ok := mine[l]; ok {
			out[i] = n
		}
	}
	return out
}

// centresOfPoints returns the mean of each of k labels' points.
func centresOfPoints(points [][2]float64, labels []int, k int) [][2]float64 {
	sum := make([][2]float64, k)
	for i, p := range points {
		sum[labels[i]][0] += p[0]
		sum[labels[i]][1] += p[1]
	}
	for c := range sum {
		if n := float64(count(labels, c)); n > 0 {
			sum[c] = [2]float64{sum[c][0] / n, sum[c][1] / n}
		}
	}
	return sum
}

func count(labels []int, c int) int {
	n := 0
	for _, l := range labels {
		if l == c {
			n++
		}
	}
	return n
}

// nameOn names labels as name does, keeping the known speakers' names
// (labels below len(known)) and numbering new ones after the highest "S<n>".
func nameOn(label []int, voices []Voice, known []string) []Turn {
	next := 0
	for _, s := range known {
		if n, err := strconv.Atoi(s[min(1, len(s)):]); err == nil && s[0] == 'S' {
			next = max(next, n)
		}
	}
	turns := name(label, voices)
	names := map[int]string{}
	for i, l := range label {
		if l < len(known) {
			names[l] = known[l]
		} else if _, ok := names[l]; !ok {
			next++
			names[l] = "S" + strconv.Itoa(next)
		}
		turns[i].Speaker = names[l]
	}
	return turns
}
