package main

import (
	"bufio"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"
)

func noEnv(string) string { return "" }

func TestOptionsDefaults(t *testing.T) {
	o, err := parseOptions(nil, func(k string) string {
		if k == "DUBFLOW_FIXTURES" {
			return "/fixtures"
		}
		return ""
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.tasks != 200 || o.languages != 10 || o.seed != 0 || o.duration != 8*time.Minute || o.settle != 15*time.Minute || o.keep || o.fixtures != "/fixtures" ||
		o.cluster || o.nodes() != 1 {
		t.Fatalf("defaults: %+v", o)
	}
}

func TestOptionsFlags(t *testing.T) {
	o, err := parseOptions([]string{"-tasks", "7", "-languages", "3", "-seed", "99", "-duration", "1m", "-settle", "2m", "-keep", "-cluster", "-fixtures", "/f"}, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.tasks != 7 || o.languages != 3 || o.seed != 99 || o.duration != time.Minute || o.settle != 2*time.Minute || !o.keep || o.fixtures != "/f" ||
		!o.cluster || o.nodes() != 3 {
		t.Fatalf("flags: %+v", o)
	}
}

func TestOptionsRejected(t *testing.T) {
	for _, args := range [][]string{
		{"-tasks", "0", "-fixtures", "/f"},
		{"-languages", "-1", "-fixtures", "/f"},
		{"-duration", "1s", "-fixtures", "/f"},
		{"-settle", "0s", "-fixtures", "/f"},
		{"-fixtures", "/f", "extra"},
		{"-seed", "-1", "-fixtures", "/f"},
		{}, // no fixtures
	} {
		if _, err := parseOptions(args, noEnv, io.Discard); err == nil {
			t.Errorf("%q: accepted", args)
		}
	}
}

// passing is a summary of a run that found nothing.
func passing() *summary {
	return &summary{Requested: 3, Submitted: 3, Tasks: 3, Done: 3, ValidOutputs: 3}
}

func TestVerdictPass(t *testing.T) {
	s := passing()
	// A redelivered success event (same message id) is at-least-once
	// delivery an integrator deduplicates: reported, not a failure.
	s.MultiSuccess = []finding{{"t1", "2 deliveries, 1 distinct message id"}}
	s.Redrives = 4
	var out strings.Builder
	if !s.print(&out) {
		t.Fatalf("failed:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "VERDICT: PASS") || !strings.Contains(out.String(), "done / failed / stuck:      3 / 0 / 0") {
		t.Fatalf("output:\n%s", out.String())
	}
}

func TestVerdictFails(t *testing.T) {
	cases := map[string]func(s *summary){
		"not submitted":    func(s *summary) { s.Submitted = 2 },
		"failed":           func(s *summary) { s.Done = 2; s.Failed = []finding{{"t", "x"}} },
		"stuck":            func(s *summary) { s.Done = 2; s.Stuck = []finding{{"t", "x"}} },
		"extra task":       func(s *summary) { s.Tasks = 4 },
		"invalid output":   func(s *summary) { s.InvalidOutputs = []finding{{"t", "x"}} },
		"two successes":    func(s *summary) { s.MultiSuccessDistinct = []finding{{"t", "x"}} },
		"missing success":  func(s *summary) { s.MissingSuccess = []finding{{"t", "x"}} },
		"duplicate part":   func(s *summary) { s.DuplicateParts = []finding{{"t", "x"}} },
		"waiting re-drive": func(s *summary) { s.WaitingRedrives = []finding{{"t", "x"}} },
		"outbox left":      func(s *summary) { s.OutboxLeft = 1 },
	}
	for name, breakIt := range cases {
		s := passing()
		breakIt(s)
		var out strings.Builder
		if s.print(&out) {
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
		s.WaitingRedrives = append(s.WaitingRedrives, finding{"t", "x"})
	}
	var out strings.Builder
	s.print(&out)
	if !strings.Contains(out.String(), "... and 5 more") {
		t.Fatalf("output:\n%s", out.String())
	}
}

func TestMetricSumAcrossRestarts(t *testing.T) {
	m := newMetricSum("dubflow_reconciler_actions_total")
	page := func(lease, stuck float64) *bufio.Scanner {
		return bufio.NewScanner(strings.NewReader(
			"# HELP dubflow_reconciler_actions_total x\n" +
				`dubflow_reconciler_actions_total{action="lease_redriven",step="asr"} ` + ftoa(lease) + "\n" +
				`dubflow_reconciler_actions_total{action="task_redriven",step="asr"} ` + ftoa(stuck) + "\n" +
				"other_metric 5\n"))
	}
	m.add(page(1, 2))
	m.add(page(1, 5))
	// A restart the supervisor reports: the new process counts from 0,
	// even when its first value is not below the last one.
	m.restarted()
	m.add(page(2, 6))
	// A reset seen only in the values.
	m.add(page(0, 1))
	got := m.byLabel("action")
	if got["lease_redriven"] != 3 || got["task_redriven"] != 12 || len(got) != 2 {
		t.Fatalf("sums %v, want lease_redriven=3 task_redriven=12", got)
	}
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func TestObserverCountsEachPublishOnce(t *testing.T) {
	o := newObserver("")
	id := uuid.New()
	body := []byte(`{"event":"task.succeeded","task_id":"` + id.String() + `","status":"done","occurred_at":"2026-01-01T00:00:00Z"}`)
	o.record(amqp.Delivery{Body: body, MessageId: "m1", RoutingKey: "event.task.succeeded"})
	// The observer's own redelivery (its ack was lost): not counted.
	o.record(amqp.Delivery{Body: body, MessageId: "m1", Redelivered: true, RoutingKey: "event.task.succeeded"})
	got, _ := o.snapshot()
	if got[id].succeeded != 1 {
		t.Fatalf("after a redelivery: %d success events, want 1", got[id].succeeded)
	}
	// The pipeline publishing the same event again: counted, same id.
	o.record(amqp.Delivery{Body: body, MessageId: "m1", RoutingKey: "event.task.succeeded"})
	got, _ = o.snapshot()
	if got[id].succeeded != 2 || len(got[id].ids) != 1 {
		t.Fatalf("after a republish: %+v", got[id])
	}
	// A second success under another id.
	o.record(amqp.Delivery{Body: body, MessageId: "m2", RoutingKey: "event.task.succeeded"})
	got, bad := o.snapshot()
	if got[id].succeeded != 3 || len(got[id].ids) != 2 || bad != 0 {
		t.Fatalf("after a second event: %+v, bad %d", got[id], bad)
	}
}

func TestServiceEnvPassesSettings(t *testing.T) {
	t.Setenv("STUCK_TASK_SECONDS", "42")
	t.Setenv("ASR_CHUNK_SECONDS", "10")
	t.Setenv("UNRELATED", "x")
	env := serviceEnv(map[string]string{"AMQP_URL": "amqp://proxy/"}, "/tmp/x")
	if env["STUCK_TASK_SECONDS"] != "42" || env["ASR_CHUNK_SECONDS"] != "10" || env["UNRELATED"] != "" ||
		env["AMQP_URL"] != "amqp://proxy/" || env["TMPDIR"] != "/tmp/x" || env["RECONCILE_INTERVAL_SECONDS"] != "5" {
		t.Fatalf("env: %v", env)
	}
}

// TestSeed003Figures: the summary prints completion (done / tasks) and
// availability (confirmed / requested submissions) against seed 003's
// targets.
func TestSeed003Figures(t *testing.T) {
	s := &summary{Requested: 200, Submitted: 199, Tasks: 240, Done: 238}
	want := "seed 003:                   completion 99.17 % (done 238 / tasks 240; target > 99 %), availability 99.50 % (submissions confirmed 199 / requested 200; target 99.9 %)"
	if got := s.seed003(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	var out strings.Builder
	s.print(&out)
	if !strings.Contains(out.String(), want) {
		t.Errorf("the summary does not print it:\n%s", out.String())
	}
}

func TestOptionsHA(t *testing.T) {
	o, err := parseOptions([]string{"-ha", "-async", "-max-pause", "20s", "-fixtures", "/f"}, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !o.ha || !o.async || o.maxPause != 20*time.Second || o.nodes() != haRabbitNodes {
		t.Fatalf("flags: %+v", o)
	}
	if o, _ := parseOptions([]string{"-fixtures", "/f"}, noEnv, io.Discard); o.ha || o.async || o.maxPause != 30*time.Second {
		t.Fatalf("defaults: %+v", o)
	}
	for _, args := range [][]string{
		{"-ha", "-cluster", "-fixtures", "/f"},
		{"-async", "-fixtures", "/f"},
		{"-ha", "-max-pause", "-1s", "-fixtures", "/f"},
	} {
		if _, err := parseOptions(args, noEnv, io.Discard); err == nil {
			t.Errorf("%q: accepted", args)
		}
	}
}

// The -ha verdict: a pause over the goal, a fault that could not be
// injected, a heal check that could not read everything each fail the
// run; a fault with no step after it (no work left) does not.
func TestVerdictHA(t *testing.T) {
	start := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	ha := func() *summary {
		s := passing()
		s.HA, s.Start, s.MaxPause = true, start, 30*time.Second
		s.Pauses = []pause{{Kind: "postgres_failover", At: start.Add(time.Minute), Pause: 11 * time.Second},
			{Kind: "minio_kill", At: start.Add(2 * time.Minute), None: true}}
		s.HealChecks = []healCheck{{Process: 2, With: 3, Read: 3, Total: 3, Rounds: 1}}
		return s
	}
	var out strings.Builder
	if s := ha(); !s.print(&out) {
		t.Fatalf("failed:\n%s", out.String())
	}
	for _, want := range []string{"postgres_failover    1 × longest  11.0 s  (at 1m0s: 11.0 s); a task in flight waited ≤ 0.0 s", "at 2m0s: no step after it",
		"process 2 killed and rejoined; 3 of 3 outputs read with only it and process 3 up after 1 heal rounds"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	cases := map[string]func(s *summary){
		"long pause":   func(s *summary) { s.Pauses[0].Pause = 31 * time.Second },
		"fault failed": func(s *summary) { s.Faults = map[string]int{"postgres_failover_error": 1} },
		"unhealed":     func(s *summary) { s.HealChecks[0].Read = 2 },
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

func TestRotate(t *testing.T) {
	if got := rotate("a,b,c", 4); got != "b,c,a" {
		t.Errorf("rotate = %q", got)
	}
	if got := rotate("a", 2); got != "a" {
		t.Errorf("rotate one = %q", got)
	}
}
