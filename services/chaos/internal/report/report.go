package report

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// Finding is one task (or part) that breaks a promise, with the evidence.
type Finding struct {
	Task   string
	Detail string
}

// Summary is what a run found; verdict judges it.
type Summary struct {
	Seed      uint64
	Requested int
	// Submitted is how many submissions dubctl confirmed; Tasks how many
	// tasks the database holds (a submission whose answer was lost may
	// have created one more).
	Submitted int
	Tasks     int
	// Parents are the tasks of several languages among Tasks, Children
	// their child tasks (in Tasks too).
	Parents, Children int
	Done              int
	Failed            []Finding
	Stuck             []Finding
	// InvalidOutputs are done tasks whose output video is missing or lacks
	// a video or an audio stream.
	InvalidOutputs []Finding
	ValidOutputs   int
	// MultiSuccess are tasks whose event.task.succeeded reached the
	// integrator more than once; MultiSuccessDistinct those among them
	// with more than one distinct message id (not deduplicable).
	MultiSuccess         []Finding
	MultiSuccessDistinct []Finding
	// MissingSuccess are done tasks whose success event never arrived.
	MissingSuccess []Finding
	// DuplicateParts are (task, step, part) with more than one succeeded
	// row.
	DuplicateParts []Finding
	// Redrives are the reconciler's replays; WaitingRedrives those of a
	// step whose earlier message was still on its way (an earlier attempt
	// started after the re-drive).
	Redrives        int
	WaitingRedrives []Finding
	// RedriveMetric is dubflow_reconciler_actions_total summed over the
	// run (restarts of the reconciler included), by action.
	RedriveMetric map[string]float64
	OutboxLeft    int
	DeadLetters   int
	// Faults counts what was injected, by kind.
	Faults map[string]int
	// SelfExits counts services that exited without being killed.
	SelfExits map[string]int
	BadEvents int

	// HA: a -ha run, judged also on its Pauses (each fault's, against
	// MaxPause when not 0) and its HealChecks; Start is the run's start.
	HA         bool
	Start      time.Time
	Pauses     []Pause
	MaxPause   time.Duration
	HealChecks []HealCheck
}

// verdict lists why the run failed; empty means it passed: every task
// submitted and done with a valid output, and no effect twice.
func (s *Summary) verdict() []string {
	var why []string
	if s.Submitted < s.Requested {
		why = append(why, fmt.Sprintf("only %d of %d tasks were submitted", s.Submitted, s.Requested))
	}
	if n := len(s.Failed) + len(s.Stuck); n > 0 || s.Done != s.Tasks {
		why = append(why, fmt.Sprintf("%d of %d tasks did not end done (%d failed, %d stuck)", s.Tasks-s.Done, s.Tasks, len(s.Failed), len(s.Stuck)))
	}
	if len(s.InvalidOutputs) > 0 {
		why = append(why, fmt.Sprintf("%d done tasks without a valid output video", len(s.InvalidOutputs)))
	}
	if len(s.MultiSuccessDistinct) > 0 {
		why = append(why, fmt.Sprintf("%d tasks succeeded more than once (distinct success events)", len(s.MultiSuccessDistinct)))
	}
	if len(s.MissingSuccess) > 0 {
		why = append(why, fmt.Sprintf("%d done tasks whose success event never arrived", len(s.MissingSuccess)))
	}
	if len(s.DuplicateParts) > 0 {
		why = append(why, fmt.Sprintf("%d parts succeeded more than once", len(s.DuplicateParts)))
	}
	if len(s.WaitingRedrives) > 0 {
		why = append(why, fmt.Sprintf("%d re-drives of steps that were only waiting (their work ran twice)", len(s.WaitingRedrives)))
	}
	if s.OutboxLeft > 0 {
		why = append(why, fmt.Sprintf("%d outbox rows never published", s.OutboxLeft))
	}
	return append(why, s.haVerdict()...)
}

// maxListed bounds the findings printed per kind.
const maxListed = 15

// Print writes the summary and the verdict; it returns whether the run
// passed.
func (s *Summary) Print(w io.Writer) bool {
	fmt.Fprintf(w, "\n=== chaos summary (seed %d)\n", s.Seed)
	fmt.Fprintf(w, "faults injected:            %s\n", Counts(s.Faults))
	fmt.Fprintf(w, "services exited by themselves: %s\n", Counts(s.SelfExits))
	fmt.Fprintf(w, "tasks:                      %d requested, %d submitted, %d in the database (%d of several languages and their %d children)\n",
		s.Requested, s.Submitted, s.Tasks, s.Parents, s.Children)
	fmt.Fprintf(w, "done / failed / stuck:      %d / %d / %d\n", s.Done, len(s.Failed), len(s.Stuck))
	fmt.Fprintln(w, s.seed003())
	fmt.Fprintf(w, "valid outputs:              %d of %d done (ffprobe: video and audio streams; a parent: one child per language)\n", s.ValidOutputs, s.Done)
	fmt.Fprintf(w, "tasks with >1 success event: %d (of which %d with distinct message ids)\n", len(s.MultiSuccess), len(s.MultiSuccessDistinct))
	fmt.Fprintf(w, "done tasks without success event: %d\n", len(s.MissingSuccess))
	fmt.Fprintf(w, "duplicate succeeded parts:  %d\n", len(s.DuplicateParts))
	fmt.Fprintf(w, "reconciler re-drives:       %d (database), of steps only waiting: %d; metric: %s\n", s.Redrives, len(s.WaitingRedrives), countsF(s.RedriveMetric))
	fmt.Fprintf(w, "outbox rows left:           %d\n", s.OutboxLeft)
	fmt.Fprintf(w, "dead letters recorded:      %d\n", s.DeadLetters)
	if s.BadEvents > 0 {
		fmt.Fprintf(w, "unreadable events:          %d\n", s.BadEvents)
	}
	s.printHA(w)
	list(w, "failed", s.Failed)
	list(w, "stuck", s.Stuck)
	list(w, "invalid output", s.InvalidOutputs)
	list(w, "more than one success event", s.MultiSuccess)
	list(w, "success event missing", s.MissingSuccess)
	list(w, "duplicate succeeded part", s.DuplicateParts)
	list(w, "re-drive of a waiting step", s.WaitingRedrives)
	why := s.verdict()
	if len(why) == 0 {
		fmt.Fprintln(w, "VERDICT: PASS — every task done with a valid output, no effect twice")
		return true
	}
	fmt.Fprintln(w, "VERDICT: FAIL")
	for _, r := range why {
		fmt.Fprintln(w, "  - "+r)
	}
	return false
}

func list(w io.Writer, what string, fs []Finding) {
	if len(fs) == 0 {
		return
	}
	fmt.Fprintf(w, "--- %s (%d):\n", what, len(fs))
	for i, f := range fs {
		if i == maxListed {
			fmt.Fprintf(w, "  ... and %d more\n", len(fs)-maxListed)
			break
		}
		fmt.Fprintf(w, "  %s %s\n", f.Task, f.Detail)
	}
}

func Counts(m map[string]int) string {
	f := make(map[string]float64, len(m))
	for k, v := range m {
		f[k] = float64(v)
	}
	return countsF(f)
}

func countsF(m map[string]float64) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%g", k, m[k])
	}
	return strings.Join(parts, " ")
}

// seed003 is the run's figures against seed 003's targets: completion
// (tasks done of those in the database, > 99 %) and availability (the
// submissions the system confirmed of those requested, under the faults,
// 99.9 %).
func (s *Summary) seed003() string {
	completion, availability := ratio(s.Done, s.Tasks), ratio(s.Submitted, s.Requested)
	return fmt.Sprintf("seed 003:                   completion %.2f %% (done %d / tasks %d; target > 99 %%), availability %.2f %% (submissions confirmed %d / requested %d; target 99.9 %%)",
		100*completion, s.Done, s.Tasks, 100*availability, s.Submitted, s.Requested)
}

// ratio is a/b, 0 when b is.
func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
