package media

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
)

// Speed-up bounds for Fit. A speed-up is the whole factor a line is played
// faster than the engine's natural rate: the synthesis rate (Slot.SynthRate)
// times the tempo Fit stretches the clip by.
const (
	// DefaultMaxSpeedup is the speed-up Fit allows to keep a line inside
	// its own slot when none is configured: past about 1.3× listeners
	// notice the hurry.
	DefaultMaxSpeedup = 1.3
	// MinMaxSpeedup and MaxMaxSpeedup bound the configurable speed-up:
	// 1.0 disables speeding up; past 1.5 speech becomes hard to follow.
	MinMaxSpeedup = 1.0
	MaxMaxSpeedup = 1.5
	// DefaultRescueSpeedup is how fast a line may be played, when nothing
	// else makes it fit, before it is cut; MaxRescueSpeedup bounds it.
	DefaultRescueSpeedup = 1.5
	MaxRescueSpeedup     = 2.0
)

// Slot is one synthesized segment and its place in the original timeline.
type Slot struct {
	// N numbers the segment from 1, as people see it (dub.Segments' n,
	// what redub takes); 0 numbers it by its place among the slots.
	N int `json:"n,omitempty"`
	// Idx identifies the segment in the pipeline (segments.idx).
	Idx int `json:"idx"`
	// StartMS and EndMS bound the original speech.
	StartMS int `json:"start_ms"`
	EndMS   int `json:"end_ms"`
	// NextStartMS is where the next segment starts; 0 when there is none.
	NextStartMS int `json:"next_start_ms"`
	// AudioMS is the length of the synthesized clip.
	AudioMS int `json:"audio_ms"`
	// SynthRate is how much faster than its default rate the engine spoke
	// the clip (espeak-ng's words per minute over the default, a remote
	// engine's speed); 0 means 1.
	SynthRate float64 `json:"synth_rate,omitempty"`
	// LeadMS and TrailMS are the silence at the clip's start and end
	// (MeasureClip): Fit trims them to keepLeadMS and keepTrailMS, so
	// that the line starts with its source line and no stretch is spent
	// on silence.
	LeadMS  int `json:"lead_ms,omitempty"`
	TrailMS int `json:"trail_ms,omitempty"`
}

// FitOptions tune Fit.
type FitOptions struct {
	// MaxSpeedup is the largest speed-up (synthesis rate times stretch) a
	// line gets to stay in its slot or, at that speed, with the silence it
	// borrows; 0 means DefaultMaxSpeedup. Fit clamps it to
	// [MinMaxSpeedup, MaxMaxSpeedup]; Validate reports a value outside.
	MaxSpeedup float64
	// RescueSpeedup is the largest speed-up for a line that does not fit
	// even with the borrowed silence at MaxSpeedup (flagged
	// NoteOverBound); past it the line is cut. 0 means
	// max(DefaultRescueSpeedup, MaxSpeedup); a value below MaxSpeedup
	// counts as MaxSpeedup (cut rather than hurry).
	RescueSpeedup float64
	// TotalMS is the length of the timeline. When set, the last segment may
	// borrow the silence up to it; otherwise it has only its slot.
	TotalMS int
}

// Validate reports options Fit would have to clamp.
func (o FitOptions) Validate() error {
	if o.MaxSpeedup != 0 && (o.MaxSpeedup < MinMaxSpeedup || o.MaxSpeedup > MaxMaxSpeedup || math.IsNaN(o.MaxSpeedup)) {
		return fmt.Errorf("max speed-up %v outside [%v, %v]", o.MaxSpeedup, MinMaxSpeedup, MaxMaxSpeedup)
	}
	if o.RescueSpeedup != 0 && (o.RescueSpeedup < MinMaxSpeedup || o.RescueSpeedup > MaxRescueSpeedup || math.IsNaN(o.RescueSpeedup)) {
		return fmt.Errorf("rescue speed-up %v outside [%v, %v]", o.RescueSpeedup, MinMaxSpeedup, MaxRescueSpeedup)
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

func (o FitOptions) rescueSpeedup() float64 {
	r := o.RescueSpeedup
	if r == 0 || math.IsNaN(r) {
		r = DefaultRescueSpeedup
	}
	return min(max(r, o.maxSpeedup()), MaxRescueSpeedup)
}

// Placement notes, one per outcome of Fit, in the order Fit tries them.
const (
	NoteFits      = "fits"       // as long as its slot
	NotePadded    = "padded"     // shorter: silence fills the rest of the slot
	NoteSpedUp    = "sped_up"    // stretched (within MaxSpeedup) to end with its slot
	NoteBorrowed  = "borrowed"   // runs into the silence before the next segment: at MaxSpeedup, or unstretched when it overruns its slot by little (nearFitMS)
	NoteOverBound = "over_bound" // fits only faster than MaxSpeedup (at most RescueSpeedup)
	NoteTruncated = "truncated"  // too long even at RescueSpeedup: cut
)

// Placement says where and how one synthesized clip is played.
type Placement struct {
	// N numbers the segment from 1, as people see it (Slot.N): the
	// timing report's first column.
	N int `json:"n"`
	// Idx identifies the segment in the pipeline (Slot.Idx).
	Idx int `json:"idx"`
	// StartMS is where the clip starts: always the slot's start.
	StartMS int `json:"start_ms"`
	// SlotMS is the length of the original slot; AudioMS of the clip.
	SlotMS  int `json:"slot_ms"`
	AudioMS int `json:"audio_ms"`
	// TrimStartMS and TrimEndMS are the silence cut from the clip's start
	// and end before it is placed and stretched.
	TrimStartMS int `json:"trim_start_ms,omitempty"`
	TrimEndMS   int `json:"trim_end_ms,omitempty"`
	// Tempo is the stretch applied to the clip (1 = unchanged, never
	// below 1); SynthRate the engine's own speed-up, Factor their product.
	Tempo     float64 `json:"tempo"`
	SynthRate float64 `json:"synth_rate"`
	Factor    float64 `json:"factor"`
	// OutMS is how long the clip plays in the dub track.
	OutMS int `json:"out_ms"`
	// PadMS is the silence after the clip up to the slot's end.
	PadMS int `json:"pad_ms"`
	// BorrowedMS is how far the clip runs past the slot's end.
	BorrowedMS int `json:"borrowed_ms"`
	// TruncatedMS is how much of the sped-up clip was cut; non-zero flags
	// a segment whose translation is too long for the scene.
	TruncatedMS int `json:"truncated_ms"`
	// StartDriftMS and EndDriftMS are where the dubbed speech starts and
	// ends (the clip without its silence, after stretching and borrowing)
	// relative to the source line (positive: later).
	StartDriftMS int `json:"start_drift_ms"`
	EndDriftMS   int `json:"end_drift_ms"`
	// Note names the outcome: NoteFits, NotePadded, NoteSpedUp,
	// NoteBorrowed, NoteOverBound or NoteTruncated.
	Note string `json:"note"`
}

// EndMS is where the clip stops playing.
func (p Placement) EndMS() int { return p.StartMS + p.OutMS }

// Trimming and near fits.
const (
	// keepLeadMS and keepTrailMS are the silence Fit leaves at a clip's
	// start and end: enough for the onset of a soft consonant, little
	// enough to start within 0.1 s of the source line.
	keepLeadMS, keepTrailMS = 20, 60
	// nearFitMS and nearFitShare bound the overrun of a clip played as it
	// is into the silence after its slot (the lesser of the two): a line
	// that ends a little late sounds better than one stretched by 1-5 %,
	// and costs no stretching.
	nearFitMS, nearFitShare = 200, 0.05
)

// Fit places each synthesized clip at the start of its slot, its silence
// trimmed (Slot.LeadMS, TrailMS). The engine
// has already chosen its rate (Slot.SynthRate); a clip still longer than
// its slot is first stretched up to MaxSpeedup (counting the engine's
// rate), then allowed to borrow the silence before the next segment, then
// stretched up to RescueSpeedup (NoteOverBound), and what still does not
// fit is cut (NoteTruncated). A shorter clip is padded with silence, never
// slowed down. Clips never overlap: two voices at once help nobody.
func Fit(slots []Slot, opts FitOptions) []Placement {
	bound, rescue := opts.maxSpeedup(), opts.rescueSpeedup()
	out := make([]Placement, 0, len(slots))
	for i, s := range slots {
		p := fitOne(s, opts.TotalMS, bound, rescue)
		if p.N = s.N; p.N == 0 {
			p.N = i + 1
		}
		out = append(out, p)
	}
	return out
}

func fitOne(s Slot, totalMS int, bound, rescue float64) Placement {
	end := max(s.EndMS, s.StartMS)
	limit := end // where the clip must stop at the latest
	switch {
	case s.NextStartMS > 0:
		end = min(end, max(s.NextStartMS, s.StartMS)) // overlapping slots: the next one wins
		limit = max(end, s.NextStartMS)
	case totalMS > end:
		limit = totalMS
	}
	p := Placement{Idx: s.Idx, StartMS: s.StartMS, SlotMS: end - s.StartMS, AudioMS: max(s.AudioMS, 0), Tempo: 1, SynthRate: max(s.SynthRate, 1)}
	lead, trail := min(max(s.LeadMS, 0), p.AudioMS), max(s.TrailMS, 0)
	if lead+trail < p.AudioMS { // a clip with sound: trim its silence
		p.TrimStartMS, p.TrimEndMS = max(lead-keepLeadMS, 0), max(trail-keepTrailMS, 0)
	}
	slot, window, audio := p.SlotMS, limit-s.StartMS, p.AudioMS-p.TrimStartMS-p.TrimEndMS
	// What the engine already sped up counts against the bounds.
	stretch, last := max(roundDown(bound/p.SynthRate), 1), max(roundDown(rescue/p.SynthRate), 1)
	switch {
	case audio <= slot:
		p.Note = NotePadded
		if audio == slot {
			p.Note = NoteFits
		}
	case audio <= window && float64(audio-slot) <= min(nearFitMS, nearFitShare*float64(slot)):
		p.Note = NoteBorrowed
	case float64(audio) <= float64(slot)*stretch:
		p.Tempo, p.Note = tempoFor(audio, slot), NoteSpedUp
	case float64(audio) <= float64(window)*stretch:
		p.Tempo, p.Note = max(stretch, tempoFor(audio, window)), NoteBorrowed
	case float64(audio) <= float64(window)*last:
		p.Tempo, p.Note = tempoFor(audio, window), NoteOverBound
	default:
		p.Tempo, p.Note = last, NoteTruncated
		p.TruncatedMS = int(math.Ceil(float64(audio)/last)) - window
	}
	p.OutMS = min(played(audio, p.Tempo), window)
	p.BorrowedMS, p.PadMS = max(p.OutMS-slot, 0), max(slot-p.OutMS, 0)
	p.Factor = math.Round(p.SynthRate*p.Tempo*1000) / 1000
	// The speech itself starts after the lead left and ends before the
	// trail left.
	p.StartDriftMS = int(math.Round(float64(lead-p.TrimStartMS) / p.Tempo))
	speech := max(p.AudioMS-p.TrimStartMS-max(trail, p.TrimEndMS), 0)
	p.EndDriftMS = p.StartMS + min(played(speech, p.Tempo), p.OutMS) - end
	return p
}

// played is how long audio ms last at tempo, rounded up.
func played(audio int, tempo float64) int {
	return int(math.Ceil(float64(audio)/tempo - 1e-6)) // 1e-6: float noise, not a millisecond
}

// tempoFor is the tempo, rounded up to 1/1000, that plays audio ms in out ms.
func tempoFor(audio, out int) float64 {
	return math.Ceil(float64(audio)/float64(out)*1000) / 1000
}

func roundDown(x float64) float64 { return math.Floor(x*1000) / 1000 }

// TimingReport is the per-segment timing report stored with a dubbed video.
type TimingReport struct {
	MaxSpeedup    float64     `json:"max_speedup"`
	RescueSpeedup float64     `json:"rescue_speedup"`
	TotalMS       int         `json:"total_ms"`
	Segments      []Placement `json:"segments"`
	Summary       struct {
		Segments  int `json:"segments"`
		Padded    int `json:"padded"`
		SpedUp    int `json:"sped_up"`
		Borrowed  int `json:"borrowed"`
		OverBound int `json:"over_bound"`
		Truncated int `json:"truncated"`
		// MaxFactor is the largest speed-up of any line, MaxStartDriftMS
		// the largest start drift (absolute).
		MaxFactor       float64 `json:"max_factor"`
		MaxStartDriftMS int     `json:"max_start_drift_ms"`
	} `json:"summary"`
	// Mix says how the dub track was mixed, when it was.
	Mix *MixReport `json:"mix,omitempty"`
}

// NewTimingReport summarizes placements made by Fit with opts.
func NewTimingReport(placements []Placement, opts FitOptions) *TimingReport {
	r := &TimingReport{MaxSpeedup: opts.maxSpeedup(), RescueSpeedup: opts.rescueSpeedup(), TotalMS: opts.TotalMS, Segments: placements}
	if r.Segments == nil {
		r.Segments = []Placement{}
	}
	r.Summary.Segments = len(placements)
	counts := map[string]*int{NotePadded: &r.Summary.Padded, NoteSpedUp: &r.Summary.SpedUp, NoteBorrowed: &r.Summary.Borrowed,
		NoteOverBound: &r.Summary.OverBound, NoteTruncated: &r.Summary.Truncated}
	for _, p := range placements {
		if n := counts[p.Note]; n != nil {
			*n++
		}
		r.Summary.MaxFactor = max(r.Summary.MaxFactor, p.Factor)
		r.Summary.MaxStartDriftMS = max(r.Summary.MaxStartDriftMS, p.StartDriftMS, -p.StartDriftMS)
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
