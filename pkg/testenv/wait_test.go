package testenv

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// deadlineTB is a test with a deadline of its choosing.
type deadlineTB struct {
	testing.TB
	end time.Time
	has bool
}

func (d deadlineTB) Deadline() (time.Time, bool) { return d.end, d.has }

func TestScaleReadsTheFactorAndIgnoresNonsense(t *testing.T) {
	for v, want := range map[string]float64{"": 1, "3": 3, "2.5": 2.5, "0.5": 1, "0": 1, "-2": 1, "x": 1, "NaN": 1} {
		t.Setenv(ScaleEnv, v)
		if got := Scale(); got != want {
			t.Errorf("%s=%q: Scale() = %v, want %v", ScaleEnv, v, got, want)
		}
	}
}

func TestWithinScalesButStopsBeforeTheTestsDeadline(t *testing.T) {
	t.Setenv(ScaleEnv, "4")
	far := deadlineTB{TB: t, end: time.Now().Add(time.Hour), has: true}
	if got := Within(far, 10*time.Second); got != 40*time.Second {
		t.Errorf("Within(10s) with the deadline an hour away = %s, want 40s", got)
	}
	near := deadlineTB{TB: t, end: time.Now().Add(20 * time.Second), has: true}
	if got := Within(near, 10*time.Second); got > 18*time.Second || got < 15*time.Second {
		t.Errorf("Within(10s×4) with the deadline 20 s away = %s, want the 20 s less a tenth", got)
	}
	none := deadlineTB{TB: t}
	if got := Within(none, 10*time.Second); got != 40*time.Second {
		t.Errorf("Within(10s) without a deadline = %s, want 40s", got)
	}
}

// A harness wait with no bound of its own lasts until shortly before the
// test binary's deadline, not a fixed 90 s: under -race on a loaded machine
// a step that takes seconds takes minutes.
func TestWaitDeadlineFollowsTheTestsDeadline(t *testing.T) {
	t.Setenv(ScaleEnv, "")
	end := time.Now().Add(20 * time.Minute)
	got := WaitDeadline(deadlineTB{TB: t, end: end, has: true})
	if want := end.Add(-45 * time.Second); got.Sub(want).Abs() > time.Second {
		t.Errorf("WaitDeadline with the deadline in 20 min = %s, want 45 s before it (%s)", got, want)
	}
	if left := time.Until(WaitDeadline(deadlineTB{TB: t})); left < 89*time.Second || left > 90*time.Second {
		t.Errorf("WaitDeadline without a deadline is %s away, want 90 s", left)
	}
	t.Setenv(ScaleEnv, "2")
	if left := time.Until(WaitDeadline(deadlineTB{TB: t})); left < 179*time.Second || left > 180*time.Second {
		t.Errorf("WaitDeadline without a deadline, scale 2, is %s away, want 180 s", left)
	}
}

func TestPollSeesAConditionAtOnceAndGivesUpAtTheDeadline(t *testing.T) {
	t.Parallel()
	calls := 0
	start := time.Now()
	if !Poll(start.Add(time.Minute), func() bool { calls++; return calls == 3 }) {
		t.Fatal("Poll gave up on a condition that held at the third call")
	}
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Errorf("three calls took %s, want the first pauses short (2 ms, 4 ms)", took)
	}
	start = time.Now()
	if Poll(start.Add(200*time.Millisecond), func() bool { return false }) {
		t.Fatal("Poll reported a condition that never held")
	}
	if took := time.Since(start); took < 200*time.Millisecond || took > 2*time.Second {
		t.Errorf("Poll gave up after %s, want just past 200 ms", took)
	}
}

// fatalTB records a Fatalf instead of ending the goroutine.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) { f.msg = fmt.Sprintf(format, args...) }

func TestEventuallyWithinFailsSayingWhatItWaitedFor(t *testing.T) {
	t.Setenv(ScaleEnv, "")
	f := &fatalTB{TB: t}
	EventuallyWithin(f, 100*time.Millisecond, "the moon", func() bool { return false })
	if !strings.Contains(f.msg, "waiting for the moon") {
		t.Errorf("failure = %q, want it to name what was waited for", f.msg)
	}
	f.msg = ""
	EventuallyWithin(f, time.Minute, "the sun", func() bool { return true })
	if f.msg != "" {
		t.Errorf("a condition that holds failed the test: %q", f.msg)
	}
}

func TestClockMovesOnlyWhenMoved(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC)
	c := NewClock(start)
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("Now() = %s, want %s", got, start)
	}
	if got := c.Advance(90 * time.Second); !got.Equal(start.Add(90*time.Second)) || !c.Now().Equal(got) {
		t.Fatalf("Advance(90s) = %s, Now() = %s, want %s", got, c.Now(), start.Add(90*time.Second))
	}
	c.Set(start)
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("after Set, Now() = %s, want %s", got, start)
	}
}
