package media

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
)

// Speed-up bounds for Fit.
const (
	// DefaultMaxSpeedup is the speed-up Fit allows when none is configured.
	DefaultMaxSpeedup = 1.35
	// MinMaxSpeedup and MaxMaxSpeedup bound the configurable speed-up:
	// 1.0 disables speeding up; past 1.5 speech becomes hard to follow.
	MinMaxSpeedup = 1.0
	MaxMaxSpeedup = 1.5
)

// Slot is one synthesized segment and its place in the original timeline.
type Slot struct {
	// Idx identifies the segment.
	Idx int `json:"idx"`
	// StartMS and EndMS bound the original speech.
	StartMS int `json:"start_ms"`
	EndMS   int `json:"end_ms"`
	// NextStartMS is where the next segment starts; 0 when there is none.
	NextStartMS int `json:"next_start_ms"`
	// AudioMS is the length of the synthesized clip.
	AudioMS int `json:"audio_ms"`
}

// FitOptions tune Fit.
type FitOptions struct {
	// MaxSpeedup is the largest tempo a clip may be played at; 0 means
	// DefaultMaxSpeedup. Fit clamps it to [MinMaxSpeedup, MaxMaxSpeedup];
	// Validate reports a value outside that range.
	MaxSpeedup float64
	// TotalMS is the length of the timeline. When set, the last segment may
	// borrow the silence up to it; otherwise it has only its slot.
	TotalMS int
}

// Validate reports options Fit would have to clamp.
func (o FitOptions) Validate() error {
	if o.MaxSpeedup != 0 && (o.MaxSpeedup < MinMaxSpeedup || o.MaxSpeedup > MaxMaxSpeedup || math.IsNaN(o.MaxSpeedup)) {
		return fmt.Errorf("max speed-up %v outside [%v, %v]", o.MaxSpeedup, MinMaxSpeedup, MaxMaxSpeedup)
	}
	if o.TotalMS < 0 {
		return fmt.Errorf("timeline length %d ms is negative", o.TotalMS)
	}
	return nil
}

func (o FitOptions) maxSpeedup() float64 {
	switch {
	case o.MaxSpeedup == 0 || math.IsNaN(o.MaxSpeedup):
		return DefaultMaxSpeedup
	case o.MaxSpeedup < MinMaxSpeedup:
		return MinMaxSpeedup
	case o.MaxSpeedup > MaxMaxSpeedup:
		return MaxMaxSpeedup
	}
	return o.MaxSpeedup
}

// Placement notes, one per outcome of Fit.
const (
	NoteFits      = "fits"      // as long as its slot
	NotePadded    = "padded"    // shorter: silence fills the rest of the slot
	NoteBorrowed  = "borrowed"  // longer: runs into the silence before the next segment
	NoteSpedUp    = "sped_up"   // longer than slot and silence: played faster
	NoteTruncated = "truncated" // too long even at the maximum speed-up: cut
)

// Placement says where and how one synthesized clip is played.
type Placement struct {
	// Idx identifies the segment.
	Idx int `json:"idx"`
	// StartMS is where the clip starts: always the slot's start.
	StartMS int `json:"start_ms"`
	// SlotMS is the length of the original slot; AudioMS of the clip.
	SlotMS  int `json:"slot_ms"`
	AudioMS int `json:"audio_ms"`
	// Tempo is the playback speed (1 = unchanged, never below 1).
	Tempo float64 `json:"tempo"`
	// OutMS is how long the clip plays in the dub track.
	OutMS int `json:"out_ms"`
	// PadMS is the silence after the clip up to the slot's end.
	PadMS int `json:"pad_ms"`
	// BorrowedMS is how far the clip runs past the slot's end.
	BorrowedMS int `json:"borrowed_ms"`
	// TruncatedMS is how much of the sped-up clip was cut; non-zero flags
	// a segment whose translation is too long for the scene.
	TruncatedMS int `json:"truncated_ms"`
	// Note names the outcome: NoteFits, NotePadded, NoteBorrowed,
	// NoteSpedUp or NoteTruncated.
	Note string `json:"note"`
}

// EndMS is where the clip stops playing.
func (p Placement) EndMS() int { return p.StartMS + p.OutMS }

// Fit places each synthesized clip at the start of its slot. A clip shorter
// than its slot is padded with silence, never stretched. A longer one first
// borrows the silence before the next segment, then is sped up by at most
// the maximum speed-up, and what still does not fit is cut: clips never
// overlap, since two voices at once help nobody, and a cut is flagged with
// TruncatedMS and NoteTruncated so the timing report shows it.
func Fit(slots []Slot, opts FitOptions) []Placement {
	maxTempo := opts.maxSpeedup()
	out := make([]Placement, 0, len(slots))
	for _, s := range slots {
		out = append(out, fitOne(s, opts.TotalMS, maxTempo))
	}
	return out
}

func fitOne(s Slot, totalMS int, maxTempo float64) Placement {
	end := max(s.EndMS, s.StartMS)
	limit := end // where the clip must stop at the latest
	switch {
	case s.NextStartMS > 0:
		end = min(end, max(s.NextStartMS, s.StartMS)) // overlapping slots: the next one wins
		limit = max(end, s.NextStartMS)
	case totalMS > end:
		limit = totalMS
	}
	slot, window, audio := end-s.StartMS, limit-s.StartMS, max(s.AudioMS, 0)
	p := Placement{Idx: s.Idx, StartMS: s.StartMS, SlotMS: slot, AudioMS: audio, Tempo: 1}
	switch {
	case audio <= slot:
		p.OutMS, p.PadMS, p.Note = audio, slot-audio, NotePadded
		if p.PadMS == 0 {
			p.Note = NoteFits
		}
	case audio <= window:
		p.OutMS, p.BorrowedMS, p.Note = audio, audio-slot, NoteBorrowed
	case float64(audio) <= float64(window)*maxTempo:
		p.Tempo = min(math.Ceil(float64(audio)/float64(window)*1000)/1000, maxTempo)
		p.OutMS = min(int(math.Ceil(float64(audio)/p.Tempo)), window)
		p.BorrowedMS, p.PadMS, p.Note = max(p.OutMS-slot, 0), max(slot-p.OutMS, 0), NoteSpedUp
	default:
		p.Tempo = maxTempo
		p.OutMS = window
		p.TruncatedMS = int(math.Ceil(float64(audio)/maxTempo)) - window
		p.BorrowedMS, p.Note = window-slot, NoteTruncated
	}
	return p
}

// TimingReport is the per-segment timing report stored with a dubbed video.
type TimingReport struct {
	MaxSpeedup float64     `json:"max_speedup"`
	TotalMS    int         `json:"total_ms"`
	Segments   []Placement `json:"segments"`
	Summary    struct {
		Segments  int `json:"segments"`
		Padded    int `json:"padded"`
		Borrowed  int `json:"borrowed"`
		SpedUp    int `json:"sped_up"`
		Truncated int `json:"truncated"`
	} `json:"summary"`
}

// NewTimingReport summarizes placements made by Fit with opts.
func NewTimingReport(placements []Placement, opts FitOptions) *TimingReport {
	r := &TimingReport{MaxSpeedup: opts.maxSpeedup(), TotalMS: opts.TotalMS, Segments: placements}
	if r.Segments == nil {
		r.Segments = []Placement{}
	}
	r.Summary.Segments = len(placements)
	for _, p := range placements {
		switch p.Note {
		case NotePadded:
			r.Summary.Padded++
		case NoteBorrowed:
			r.Summary.Borrowed++
		case NoteSpedUp:
			r.Summary.SpedUp++
		case NoteTruncated:
			r.Summary.Truncated++
		}
	}
	return r
}

// WriteJSON writes the report as indented JSON.
func (r *TimingReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("write timing report: %w", err)
	}
	return nil
}
