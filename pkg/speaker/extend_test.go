package speaker_test

import (
	"slices"
	"testing"

	"github.com/dubflow/dubflow/pkg/speaker"
)

func voices(pitches ...float64) []speaker.Voice {
	out := make([]speaker.Voice, len(pitches))
	for i, p := range pitches {
		out[i] = speaker.Voice{PitchHz: p, BrightnessHz: 1000}
		if p == 0 {
			out[i].BrightnessHz = 0
		}
	}
	return out
}

func names(turns []speaker.Turn) []string {
	out := make([]string, len(turns))
	for i, t := range turns {
		out[i] = t.Speaker
	}
	return out
}

// Extend keeps the speakers given, puts new spans with the nearest known
// speaker, and makes a new speaker only of two or more spans far from every
// known one.
func TestExtend(t *testing.T) {
	for _, c := range []struct {
		name     string
		pitches  []float64
		speakers []string
		max      int
		want     []string
	}{
		{"nothing known: Cluster", []float64{100, 105, 220, 225}, []string{"", "", "", ""}, 4,
			[]string{"S1", "S1", "S2", "S2"}},
		{"near the known speaker", []float64{100, 105, 98, 110}, []string{"S1", "S1", "", ""}, 4,
			[]string{"S1", "S1", "S1", "S1"}},
		{"a new voice, twice", []float64{100, 105, 220, 225, 102}, []string{"S1", "S1", "", "", ""}, 4,
			[]string{"S1", "S1", "S2", "S2", "S1"}},
		{"one far span is no speaker", []float64{100, 105, 220, 102}, []string{"S1", "S1", "", ""}, 4,
			[]string{"S1", "S1", "S1", "S1"}},
		{"no room for more", []float64{100, 220, 100, 225, 230}, []string{"S1", "S2", "", "", ""}, 2,
			[]string{"S1", "S2", "S1", "S2", "S2"}},
		{"max one speaker", []float64{100, 105, 220, 225}, []string{"S1", "S1", "", ""}, 1,
			[]string{"S1", "S1", "S1", "S1"}},
		{"a span without pitch takes its neighbour's", []float64{220, 100, 0, 102}, []string{"S2", "S1", "", ""}, 4,
			[]string{"S2", "S1", "S1", "S1"}},
		{"chunks done out of order", []float64{0, 221, 100, 104}, []string{"", "", "S1", "S1"}, 4,
			[]string{"S1", "S1", "S1", "S1"}},
		{"numbered after the highest", []float64{100, 400, 200, 202}, []string{"S1", "S3", "", ""}, 4,
			[]string{"S1", "S3", "S4", "S4"}},
		{"two new voices", []float64{100, 100, 200, 205, 400, 410}, []string{"S1", "S1", "", "", "", ""}, 4,
			[]string{"S1", "S1", "S2", "S2", "S3", "S3"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := names(speaker.Extend(voices(c.pitches...), c.speakers, c.max))
			if !slices.Equal(got, c.want) {
				t.Errorf("Extend(%v, %v, %d) = %v, want %v", c.pitches, c.speakers, c.max, got, c.want)
			}
		})
	}
}

// Extending what Cluster found over the first spans gives the later spans
// what Cluster finds over all of them. (A voice heard once at the end of the
// first spans stays with the speaker Cluster gave it there.)
func TestExtendAfterCluster(t *testing.T) {
	all := voices(100, 104, 98, 0, 101, 230, 226, 0, 232, 99, 228)
	want := names(speaker.Cluster(all, 4))
	for cut := 1; cut < len(all); cut++ {
		first := names(speaker.Cluster(all[:cut], 4))
		speakers := append(first, make([]string, len(all)-cut)...)
		got := names(speaker.Extend(all, speakers, 4))
		if !slices.Equal(got[:cut], first) || !slices.Equal(got[cut:], want[cut:]) {
			t.Errorf("cut %d: %v, want %v then %v", cut, got, first, want[cut:])
		}
	}
}

// AssignMore keeps the voices given and does not give them again.
func TestAssignMore(t *testing.T) {
	turns := []speaker.Turn{{Speaker: "S1", PitchHz: 100}, {Speaker: "S2", PitchHz: 110}, {Speaker: "S3", PitchHz: 220}}
	got := speaker.AssignMore(turns, map[string]string{"S1": "es+m3"}, speaker.EspeakVoices, "es", "")
	want := map[string]string{"S1": "es+m3", "S2": "es+m1", "S3": "es+f2"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("AssignMore: %v, want %v", got, want)
			break
		}
	}
	// The task's own voice went to the first speaker before: it stays taken.
	got = speaker.AssignMore(turns[1:], map[string]string{"S1": "es+custom"}, speaker.EspeakVoices, "es", "es+custom")
	if got["S2"] != "es+m3" || got["S1"] != "es+custom" {
		t.Errorf("AssignMore with the task's voice: %v", got)
	}
}
