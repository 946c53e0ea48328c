package media

import (
	"bytes"
	"fmt"
	"testing"
)

// fitWant is what TestFit checks of a placement.
type fitWant struct {
	note                            string
	tempo, factor                   float64
	out, pad, borrowed, cut, endDri int
}

// fitCases are TestFit's slots, one per rung of the ladder and edge.
var fitCases = []struct {
	name string
	slot Slot
	opts FitOptions
	want fitWant
}{
	{"exact fit", Slot{StartMS: 1000, EndMS: 3000, NextStartMS: 4000, AudioMS: 2000}, FitOptions{},
		fitWant{NoteFits, 1, 1, 2000, 0, 0, 0, 0}},
	{"shorter clip is padded, never slowed down", Slot{StartMS: 1000, EndMS: 4000, NextStartMS: 5000, AudioMS: 1200}, FitOptions{},
		fitWant{NotePadded, 1, 1, 1200, 1800, 0, 0, -1800}},
	{"longer clip is stretched to end with its line", Slot{StartMS: 0, EndMS: 2000, NextStartMS: 3000, AudioMS: 2500}, FitOptions{},
		fitWant{NoteSpedUp, 1.25, 1.25, 2000, 0, 0, 0, 0}},
	{"past the bound it borrows the silence at 1.3x", Slot{StartMS: 0, EndMS: 2000, NextStartMS: 3000, AudioMS: 3000}, FitOptions{},
		fitWant{NoteBorrowed, 1.3, 1.3, 2308, 0, 308, 0, 308}},
	{"fits only over the bound: flagged", Slot{StartMS: 0, EndMS: 2000, NextStartMS: 2000, AudioMS: 2900}, FitOptions{},
		fitWant{NoteOverBound, 1.45, 1.45, 2000, 0, 0, 0, 0}},
	{"past the rescue speed-up the clip is cut and flagged", Slot{StartMS: 0, EndMS: 2000, NextStartMS: 2000, AudioMS: 4050}, FitOptions{},
		fitWant{NoteTruncated, 1.5, 1.5, 2000, 0, 0, 700, 0}},
	{"configured bound 1.5", Slot{StartMS: 0, EndMS: 2000, NextStartMS: 2000, AudioMS: 2900}, FitOptions{MaxSpeedup: 1.5},
		fitWant{NoteSpedUp, 1.45, 1.45, 2000, 0, 0, 0, 0}},
	{"bound 1.0 borrows first, then rescues", Slot{StartMS: 0, EndMS: 2000, NextStartMS: 2500, AudioMS: 2600}, FitOptions{MaxSpeedup: 1},
		fitWant{NoteOverBound, 1.04, 1.04, 2500, 0, 500, 0, 500}},
	{"bound and rescue 1.0 never speed up", Slot{StartMS: 0, EndMS: 2000, NextStartMS: 2500, AudioMS: 2600}, FitOptions{MaxSpeedup: 1, RescueSpeedup: 1},
		fitWant{NoteTruncated, 1, 1, 2500, 0, 500, 100, 500}},
	{"the engine's rate counts against the bound", Slot{StartMS: 0, EndMS: 2000, NextStartMS: 2000, AudioMS: 2200, SynthRate: 1.3}, FitOptions{},
		fitWant{NoteOverBound, 1.1, 1.43, 2000, 0, 0, 0, 0}},
	{"a little engine speed-up leaves room to stretch", Slot{StartMS: 0, EndMS: 2000, NextStartMS: 3000, AudioMS: 2300, SynthRate: 1.1}, FitOptions{},
		fitWant{NoteSpedUp, 1.15, 1.265, 2000, 0, 0, 0, 0}},
	{"uneven tempo rounds up so the clip fits", Slot{StartMS: 500, EndMS: 3500, NextStartMS: 3500, AudioMS: 3331}, FitOptions{},
		fitWant{NoteSpedUp, 1.111, 1.111, 2999, 1, 0, 0, -1}},
	{"last segment borrows up to the timeline end", Slot{StartMS: 8000, EndMS: 9000, AudioMS: 1800}, FitOptions{TotalMS: 10000},
		fitWant{NoteBorrowed, 1.3, 1.3, 1385, 0, 385, 0, 385}},
	{"last segment without a timeline keeps its slot", Slot{StartMS: 8000, EndMS: 9000, AudioMS: 1300}, FitOptions{},
		fitWant{NoteSpedUp, 1.3, 1.3, 1000, 0, 0, 0, 0}},
	{"overlapping slots: the next segment wins", Slot{StartMS: 0, EndMS: 3000, NextStartMS: 2000, AudioMS: 2500}, FitOptions{},
		fitWant{NoteSpedUp, 1.25, 1.25, 2000, 0, 0, 0, 0}},
	{"empty slot", Slot{StartMS: 500, EndMS: 500, NextStartMS: 500, AudioMS: 700}, FitOptions{},
		fitWant{NoteTruncated, 1.5, 1.5, 0, 0, 0, 467, 0}},
	{"empty clip", Slot{StartMS: 0, EndMS: 900, NextStartMS: 1000, AudioMS: 0}, FitOptions{},
		fitWant{NotePadded, 1, 1, 0, 900, 0, 0, -900}},
	{"a clip a little longer than its slot borrows silence unstretched", Slot{StartMS: 0, EndMS: 2000, NextStartMS: 3000, AudioMS: 2080}, FitOptions{},
		fitWant{NoteBorrowed, 1, 1, 2080, 0, 80, 0, 80}},
	{"without silence after it, the near fit is stretched", Slot{StartMS: 0, EndMS: 2000, NextStartMS: 2000, AudioMS: 2080}, FitOptions{},
		fitWant{NoteSpedUp, 1.04, 1.04, 2000, 0, 0, 0, 0}},
	{"past 5 % of the slot, the clip is stretched", Slot{StartMS: 0, EndMS: 2000, NextStartMS: 3000, AudioMS: 2120}, FitOptions{},
		fitWant{NoteSpedUp, 1.06, 1.06, 2000, 0, 0, 0, 0}},
}

// TestFitTrimsSilence fits clips with silence at their edges: the silence
// is cut down to keepLeadMS and keepTrailMS before anything is stretched,
// and the drifts are those of the speech, not of the clip.
func TestFitTrimsSilence(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		slot                    Slot
		note                    string
		tempo                   float64
		trimStart, trimEnd, out int
		startDrift, endDrift    int
	}{
		// 2600 ms, 2130 once trimmed: stretched 1.065, not borrowed at 1.3.
		{"lead and trail trimmed, then stretched", Slot{StartMS: 1000, EndMS: 3000, NextStartMS: 4000, AudioMS: 2600, LeadMS: 300, TrailMS: 250},
			NoteSpedUp, 1.065, 280, 190, 2000, 19, -56},
		// Trimmed, it fits: padded, not stretched.
		{"trimming makes it fit", Slot{StartMS: 0, EndMS: 2000, NextStartMS: 2500, AudioMS: 2300, LeadMS: 200, TrailMS: 300},
			NotePadded, 1, 180, 240, 1880, 20, -180},
		{"a short lead is kept", Slot{StartMS: 0, EndMS: 2000, NextStartMS: 2500, AudioMS: 1500, LeadMS: 15},
			NotePadded, 1, 0, 0, 1500, 15, -500},
		{"a silent clip is not trimmed", Slot{StartMS: 0, EndMS: 2000, NextStartMS: 2500, AudioMS: 500, LeadMS: 500},
			NotePadded, 1, 0, 0, 500, 500, -1500},
	} {
		p := Fit([]Slot{tc.slot}, FitOptions{})[0]
		got := []any{p.Note, p.Tempo, p.TrimStartMS, p.TrimEndMS, p.OutMS, p.StartDriftMS, p.EndDriftMS}
		want := []any{tc.note, tc.tempo, tc.trimStart, tc.trimEnd, tc.out, tc.startDrift, tc.endDrift}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: note, tempo, trims, out, drifts = %v, want %v", tc.name, got, want)
		}
	}
}

func TestFit(t *testing.T) {
	for _, tt := range fitCases {
		t.Run(tt.name, func(t *testing.T) {
			got := Fit([]Slot{tt.slot}, tt.opts)
			if len(got) != 1 {
				t.Fatalf("%d placements", len(got))
			}
			p := got[0]
			if g := (fitWant{p.Note, p.Tempo, p.Factor, p.OutMS, p.PadMS, p.BorrowedMS, p.TruncatedMS, p.EndDriftMS}); g != tt.want {
				t.Errorf("Fit(%+v)\n got  %+v\n want %+v", tt.slot, g, tt.want)
			}
			if p.StartMS != tt.slot.StartMS || p.StartDriftMS != 0 {
				t.Errorf("starts at %d (drift %d), want the line's start %d", p.StartMS, p.StartDriftMS, tt.slot.StartMS)
			}
			if p.EndMS() > max(tt.slot.NextStartMS, tt.slot.EndMS, tt.opts.TotalMS) {
				t.Errorf("clip ends at %d, past everything it may use", p.EndMS())
			}
			if p.Tempo < 1 {
				t.Errorf("tempo %v slows the clip down", p.Tempo)
			}
		})
	}
}

func TestFitOptionsValidate(t *testing.T) {
	for _, ok := range []FitOptions{{}, {MaxSpeedup: 1}, {MaxSpeedup: 1.5}, {MaxSpeedup: 1.35, TotalMS: 10}, {RescueSpeedup: 2}} {
		if err := ok.Validate(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
	for _, bad := range []FitOptions{{MaxSpeedup: 0.9}, {MaxSpeedup: 1.51}, {TotalMS: -1}, {RescueSpeedup: 2.1}, {RescueSpeedup: 0.5}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

// timeline is a realistic run of segments for the timing report.
var timeline = []Slot{
	{Idx: 0, StartMS: 320, EndMS: 2480, NextStartMS: 2900, AudioMS: 1900},
	{Idx: 1, StartMS: 2900, EndMS: 5100, NextStartMS: 5600, AudioMS: 2850, LeadMS: 180, TrailMS: 200},
	{Idx: 2, StartMS: 5600, EndMS: 7000, NextStartMS: 7100, AudioMS: 1950},
	{Idx: 3, StartMS: 7100, EndMS: 8000, NextStartMS: 8050, AudioMS: 2400},
	{Idx: 4, StartMS: 8050, EndMS: 9300, NextStartMS: 0, AudioMS: 1800},
}

func TestTimingReportGolden(t *testing.T) {
	opts := FitOptions{TotalMS: 10000}
	placements := Fit(timeline, opts)
	for i := 1; i < len(placements); i++ {
		if placements[i].StartMS < placements[i-1].EndMS() {
			t.Errorf("segment %d overlaps segment %d", i, i-1)
		}
	}
	var buf bytes.Buffer
	if err := NewTimingReport(placements, opts).WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	golden(t, "timing_report.golden", buf.Bytes())
}
