package report

import (
	"strings"
	"testing"
	"time"
)

// passing is a summary of a run that found nothing.
func passing() *Summary {
	return &Summary{Requested: 3, Submitted: 3, Tasks: 3, Done: 3, ValidOutputs: 3}
}

func TestVerdictPass(t *testing.T) {
	s := passing()
	// A redelivered success event (same message id) is at-least-once
	// delivery an integrator deduplicates: reported, not a failure.
	s.MultiSuccess = []Finding{{"t1", "2 deliveries, 1 distinct message id"}}
	s.Redrives = 4
	var out strings.Builder
	if !s.Print(&out) {
		t.Fatalf("failed:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "VERDICT: PASS") || !strings.Contains(out.String(), "done / failed / stuck:      3 / 0 / 0") {
		t.Fatalf("output:\n%s", out.String())
	}
}

func TestVerdictFails(t *testing.T) {
	cases := map[string]func(s *Summary){
		"not submitted":    func(s *Summary) { s.Submitted = 2 },
		"failed":           func(s *Summary) { s.Done = 2; s.Failed = []Finding{{"t", "x"}} },
		"stuck":            func(s *Summary) { s.Done = 2; s.Stuck = []Finding{{"t", "x"}} },
		"extra task":       func(s *Summary) { s.Tasks = 4 },
		"invalid output":   func(s *Summary) { s.InvalidOutputs = []Finding{{"t", "x"}} },
		"two successes":    func(s *Summary) { s.MultiSuccessDistinct = []Finding{{"t", "x"}} },
		"missing success":  func(s *Summary) { s.MissingSuccess = []Finding{{"t", "x"}} },
		"duplicate part":   func(s *Summary) { s.DuplicateParts = []Finding{{"t", "x"}} },
		"waiting re-drive": func(s *Summary) { s.WaitingRedrives = []Finding{{"t", "x"}} },
		"outbox left":      func(s *Summary) { s.OutboxLeft = 1 },
	}
	for name, breakIt := range cases {
		s := passing()
		breakIt(s)
		var out strings.Builder
		if s.Print(&out) {
			t.Errorf("%s: passed", name)
		}
		if len(s.verdict()) != 1 {
			t.Errorf("%s: reasons %q, want one", name, s.verdict())
		}
		if !strings.Contains(out.String(), "VERDICT: FAIL") {
			t.Errorf("%s: output:\n%s", name, out.String())
		}
	}
}

func TestListIsBounded(t *testing.T) {
	s := passing()
	for range maxListed + 5 {
		s.WaitingRedrives = append(s.WaitingRedrives, Finding{"t", "x"})
	}
	var out strings.Builder
	s.Print(&out)
	if !strings.Contains(out.String(), "... and 5 more") {
		t.Fatalf("output:\n%s", out.String())
	}
}

// TestSeed003Figures: the summary prints completion (done / tasks) and
// availability (confirmed / requested submissions) against seed 003's
// targets.
func TestSeed003Figures(t *testing.T) {
	s := &Summary{Requested: 200, Submitted: 199, Tasks: 240, Done: 238}
	want := "seed 003:                   completion 99.17 % (done 238 / tasks 240; target > 99 %), availability 99.50 % (submissions confirmed 199 / requested 200; target 99.9 %)"
	if got := s.seed003(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	var out strings.Builder
	s.Print(&out)
	if !strings.Contains(out.String(), want) {
		t.Errorf("the summary does not print it:\n%s", out.String())
	}
}

// The -ha verdict: a pause over the goal, a fault that could not be
// injected, a heal check that could not read everything each fail the
// run; a fault with no step after it (no work left) does not.
func TestVerdictHA(t *testing.T) {
	start := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	ha := func() *Summary {
		s := passing()
		s.HA, s.Start, s.MaxPause = true, start, 30*time.Second
		s.Pauses = []Pause{{Kind: "postgres_failover", At: start.Add(time.Minute), Pause: 11 * time.Second},
			{Kind: "minio_kill", At: start.Add(2 * time.Minute), None: true}}
		s.HealChecks = []HealCheck{{Process: 2, With: 3, Read: 3, Total: 3, Rounds: 1}}
		return s
	}
	var out strings.Builder
	if s := ha(); !s.Print(&out) {
		t.Fatalf("failed:\n%s", out.String())
	}
	for _, want := range []string{"postgres_failover    1 × longest  11.0 s  (at 1m0s: 11.0 s); a task in flight waited ≤ 0.0 s", "at 2m0s: no step after it",
		"process 2 killed and rejoined; 3 of 3 outputs read with only it and process 3 up after 1 heal rounds"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	cases := map[string]func(s *Summary){
		"long pause":   func(s *Summary) { s.Pauses[0].Pause = 31 * time.Second },
		"fault failed": func(s *Summary) { s.Faults = map[string]int{"postgres_failover_error": 1} },
		"unhealed":     func(s *Summary) { s.HealChecks[0].Read = 2 },
	}
	for name, breakIt := range cases {
		s := ha()
		breakIt(s)
		if len(s.verdict()) != 1 {
			t.Errorf("%s: reasons %q, want one", name, s.verdict())
		}
	}
	s := ha()
	s.MaxPause = 0
	s.Pauses[0].Pause = time.Hour
	if why := s.verdict(); len(why) != 0 {
		t.Errorf("-max-pause 0 judged the pauses: %q", why)
	}
}
