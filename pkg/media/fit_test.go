package media

import (
	"bytes"
	"testing"
)

func TestFit(t *testing.T) {
	tests := []struct {
		name string
		slot Slot
		opts FitOptions
		want Placement
	}{
		{"exact fit", Slot{Idx: 0, StartMS: 1000, EndMS: 3000, NextStartMS: 4000, AudioMS: 2000}, FitOptions{},
			Placement{Idx: 0, StartMS: 1000, SlotMS: 2000, AudioMS: 2000, Tempo: 1, OutMS: 2000, Note: NoteFits}},
		{"shorter clip is padded, never stretched", Slot{Idx: 1, StartMS: 1000, EndMS: 4000, NextStartMS: 5000, AudioMS: 1200}, FitOptions{},
			Placement{Idx: 1, StartMS: 1000, SlotMS: 3000, AudioMS: 1200, Tempo: 1, OutMS: 1200, PadMS: 1800, Note: NotePadded}},
		{"longer clip borrows the silence before the next segment", Slot{Idx: 2, StartMS: 0, EndMS: 2000, NextStartMS: 3000, AudioMS: 2600}, FitOptions{},
			Placement{Idx: 2, StartMS: 0, SlotMS: 2000, AudioMS: 2600, Tempo: 1, OutMS: 2600, BorrowedMS: 600, Note: NoteBorrowed}},
		{"borrows all the silence then speeds up", Slot{Idx: 3, StartMS: 0, EndMS: 2000, NextStartMS: 3000, AudioMS: 3600}, FitOptions{},
			Placement{Idx: 3, StartMS: 0, SlotMS: 2000, AudioMS: 3600, Tempo: 1.2, OutMS: 3000, BorrowedMS: 1000, Note: NoteSpedUp}},
		{"speed-up exactly at the default maximum", Slot{Idx: 4, StartMS: 0, EndMS: 2000, NextStartMS: 2000, AudioMS: 2700}, FitOptions{},
			Placement{Idx: 4, StartMS: 0, SlotMS: 2000, AudioMS: 2700, Tempo: 1.35, OutMS: 2000, Note: NoteSpedUp}},
		{"past the maximum speed-up the clip is cut and flagged", Slot{Idx: 5, StartMS: 0, EndMS: 2000, NextStartMS: 2000, AudioMS: 4050}, FitOptions{},
			Placement{Idx: 5, StartMS: 0, SlotMS: 2000, AudioMS: 4050, Tempo: 1.35, OutMS: 2000, TruncatedMS: 1000, Note: NoteTruncated}},
		{"configured maximum 1.5", Slot{Idx: 6, StartMS: 0, EndMS: 2000, NextStartMS: 2000, AudioMS: 2900}, FitOptions{MaxSpeedup: 1.5},
			Placement{Idx: 6, StartMS: 0, SlotMS: 2000, AudioMS: 2900, Tempo: 1.45, OutMS: 2000, Note: NoteSpedUp}},
		{"maximum 1.0 disables speed-up", Slot{Idx: 7, StartMS: 0, EndMS: 2000, NextStartMS: 2500, AudioMS: 2600}, FitOptions{MaxSpeedup: 1.0},
			Placement{Idx: 7, StartMS: 0, SlotMS: 2000, AudioMS: 2600, Tempo: 1, OutMS: 2500, BorrowedMS: 500, TruncatedMS: 100, Note: NoteTruncated}},
		{"maximum above 1.5 is clamped", Slot{Idx: 8, StartMS: 0, EndMS: 1000, NextStartMS: 1000, AudioMS: 3000}, FitOptions{MaxSpeedup: 3},
			Placement{Idx: 8, StartMS: 0, SlotMS: 1000, AudioMS: 3000, Tempo: 1.5, OutMS: 1000, TruncatedMS: 1000, Note: NoteTruncated}},
		{"uneven tempo rounds up so the clip fits", Slot{Idx: 9, StartMS: 500, EndMS: 3500, NextStartMS: 3500, AudioMS: 3331}, FitOptions{},
			Placement{Idx: 9, StartMS: 500, SlotMS: 3000, AudioMS: 3331, Tempo: 1.111, OutMS: 2999, PadMS: 1, Note: NoteSpedUp}},
		{"last segment borrows up to the timeline end", Slot{Idx: 10, StartMS: 8000, EndMS: 9000, AudioMS: 1800}, FitOptions{TotalMS: 10000},
			Placement{Idx: 10, StartMS: 8000, SlotMS: 1000, AudioMS: 1800, Tempo: 1, OutMS: 1800, BorrowedMS: 800, Note: NoteBorrowed}},
		{"last segment without a timeline keeps its slot", Slot{Idx: 11, StartMS: 8000, EndMS: 9000, AudioMS: 1300}, FitOptions{},
			Placement{Idx: 11, StartMS: 8000, SlotMS: 1000, AudioMS: 1300, Tempo: 1.3, OutMS: 1000, Note: NoteSpedUp}},
		{"overlapping slots: the next segment wins", Slot{Idx: 12, StartMS: 0, EndMS: 3000, NextStartMS: 2000, AudioMS: 2500}, FitOptions{},
			Placement{Idx: 12, StartMS: 0, SlotMS: 2000, AudioMS: 2500, Tempo: 1.25, OutMS: 2000, Note: NoteSpedUp}},
		{"empty slot", Slot{Idx: 13, StartMS: 500, EndMS: 500, NextStartMS: 500, AudioMS: 700}, FitOptions{},
			Placement{Idx: 13, StartMS: 500, AudioMS: 700, Tempo: 1.35, TruncatedMS: 519, Note: NoteTruncated}},
		{"empty clip", Slot{Idx: 14, StartMS: 0, EndMS: 900, NextStartMS: 1000, AudioMS: 0}, FitOptions{},
			Placement{Idx: 14, StartMS: 0, SlotMS: 900, Tempo: 1, PadMS: 900, Note: NotePadded}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Fit([]Slot{tt.slot}, tt.opts)
			if len(got) != 1 || got[0] != tt.want {
				t.Errorf("Fit(%+v)\n got  %+v\n want %+v", tt.slot, got, tt.want)
			}
			p := got[0]
			if p.EndMS() > max(tt.slot.NextStartMS, tt.slot.EndMS, tt.opts.TotalMS) {
				t.Errorf("clip ends at %d, past everything it may use", p.EndMS())
			}
			if p.Tempo < 1 {
				t.Errorf("tempo %v stretches the clip", p.Tempo)
			}
		})
	}
}

func TestFitOptionsValidate(t *testing.T) {
	for _, ok := range []FitOptions{{}, {MaxSpeedup: 1}, {MaxSpeedup: 1.5}, {MaxSpeedup: 1.35, TotalMS: 10}} {
		if err := ok.Validate(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
	for _, bad := range []FitOptions{{MaxSpeedup: 0.9}, {MaxSpeedup: 1.51}, {TotalMS: -1}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

// timeline is a realistic run of segments for the timing report.
var timeline = []Slot{
	{Idx: 0, StartMS: 320, EndMS: 2480, NextStartMS: 2900, AudioMS: 1900},
	{Idx: 1, StartMS: 2900, EndMS: 5100, NextStartMS: 5600, AudioMS: 2550},
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
