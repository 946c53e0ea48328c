package report

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// Pause is what one fault cost: the time from its start to the next step
// completed anywhere (a succeeded attempt's finish). None: no step
// completed after it (the run had no work left).
type Pause struct {
	Kind  string
	At    time.Time
	Pause time.Duration
	None  bool
	// InFlight is, of the tasks that had a step running at the fault, the
	// longest time until that task's next completed step (its own work
	// included: a stall the first figure hides when other tasks go on).
	InFlight time.Duration
}

// PauseLines are the longest pause per kind of fault, with every pause of
// the kind, for the summary.
func pauseLines(ps []Pause, start time.Time) []string {
	byKind := map[string][]Pause{}
	for _, p := range ps {
		byKind[p.Kind] = append(byKind[p.Kind], p)
	}
	kinds := make([]string, 0, len(byKind))
	for k := range byKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var lines []string
	for _, k := range kinds {
		var longest, inFlight time.Duration
		var each []string
		for _, p := range byKind[k] {
			at := p.At.Sub(start).Round(time.Second)
			inFlight = max(inFlight, p.InFlight)
			if p.None {
				each = append(each, fmt.Sprintf("at %s: no step after it", at))
				continue
			}
			longest = max(longest, p.Pause)
			each = append(each, fmt.Sprintf("at %s: %.1f s", at, p.Pause.Seconds()))
		}
		lines = append(lines, fmt.Sprintf("  %-20s %d × longest %5.1f s  (%s); a task in flight waited ≤ %.1f s for its next step",
			k, len(byKind[k]), longest.Seconds(), strings.Join(each, ", "), inFlight.Seconds()))
	}
	return lines
}

// HealCheck is what reading the outputs from a MinIO process that was
// killed and rejoined found, the other processes but one stopped: with 2
// of 4 drives every object is readable only if the rejoined drive holds
// its shards again.
type HealCheck struct {
	Process, With  int // 1-based
	Read, Total    int
	Rounds         int
	Err            string
	HealTook       time.Duration
	FirstUnreadble string
}

// printHA writes the -ha figures: the longest pause per fault and the
// MinIO heal checks.
func (s *Summary) printHA(w io.Writer) {
	if !s.HA {
		return
	}
	goal := "report only"
	if s.MaxPause > 0 {
		goal = fmt.Sprintf("goal ≤ %s", s.MaxPause)
	}
	fmt.Fprintf(w, "pauses (fault → next completed step; %s):\n", goal)
	for _, l := range pauseLines(s.Pauses, s.Start) {
		fmt.Fprintln(w, l)
	}
	if len(s.HealChecks) == 0 {
		fmt.Fprintln(w, "minio heal check:           no MinIO process was killed")
	}
	for _, c := range s.HealChecks {
		if c.Err != "" {
			fmt.Fprintf(w, "minio heal check:           process %d: %s\n", c.Process, c.Err)
			continue
		}
		fmt.Fprintf(w, "minio heal check:           process %d killed and rejoined; %d of %d outputs read with only it and process %d up after %d heal rounds (%.1f s healing)\n",
			c.Process, c.Read, c.Total, c.With, c.Rounds, c.HealTook.Seconds())
		if c.FirstUnreadble != "" {
			fmt.Fprintf(w, "  unreadable in the last round: %s\n", c.FirstUnreadble)
		}
	}
}

// haVerdict lists why the -ha figures fail the run: a pause over the goal,
// a fault that could not be injected (a failover that did not happen), a
// heal check that could not read everything.
func (s *Summary) haVerdict() []string {
	if !s.HA {
		return nil
	}
	var why []string
	over := 0
	for _, p := range s.Pauses {
		if s.MaxPause > 0 && !p.None && p.Pause > s.MaxPause {
			over++
		}
	}
	if over > 0 {
		why = append(why, fmt.Sprintf("%d pauses longer than %s", over, s.MaxPause))
	}
	failed := 0
	for k, n := range s.Faults {
		if strings.HasSuffix(k, "_error") {
			failed += n
		}
	}
	if failed > 0 {
		why = append(why, fmt.Sprintf("%d faults could not be injected or undone (see the fault counts)", failed))
	}
	for _, c := range s.HealChecks {
		if c.Err != "" || c.Read < c.Total {
			why = append(why, fmt.Sprintf("MinIO process %d: %d of %d outputs read after the heal %s", c.Process, c.Read, c.Total, c.Err))
		}
	}
	return why
}
