package testenv

import (
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
