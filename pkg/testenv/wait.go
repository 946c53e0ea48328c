package testenv

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// ScaleEnv names the factor the harness waits of this package are
// multiplied by (a number, 1 when unset): raise it on a slow or loaded
// machine (DUBFLOW_TEST_TIMEOUT_SCALE=4 under -race beside other builds).
// It lengthens only how long a harness waits for something to happen,
// never what a test asserts about how long something takes.
const ScaleEnv = "DUBFLOW_TEST_TIMEOUT_SCALE"

// noDeadlineWait is how long WaitUntil waits, times the scale, when the
// test binary runs without a deadline (go test -timeout 0).
const noDeadlineWait = 90 * time.Second

// Scale returns the factor of ScaleEnv; an unset or unusable value is 1.
func Scale() float64 {
	f, err := strconv.ParseFloat(os.Getenv(ScaleEnv), 64)
	if err != nil || !(f >= 1) {
		return 1
	}
	return f
}

// Within returns how long a harness waits for something that takes at most
// d on a quiet machine: d times Scale, but never past the test's deadline
// (less a margin, so that the test fails saying what it waited for rather
// than the binary panicking).
func Within(tb testing.TB, d time.Duration) time.Duration {
	w := time.Duration(float64(d) * Scale())
	if end, ok := testDeadline(tb); ok {
		w = min(w, time.Until(end))
	}
	return max(w, 0)
}

// WaitDeadline is when a harness wait with no bound of its own gives up:
// shortly before the test binary's deadline (go test -timeout), however
// loaded the machine; without a deadline, 90 s times Scale from now.
func WaitDeadline(tb testing.TB) time.Time {
	if end, ok := testDeadline(tb); ok {
		return end
	}
	return time.Now().Add(time.Duration(float64(noDeadlineWait) * Scale()))
}

// testDeadline is the test binary's deadline less a margin for the
// failure report and the test's cleanups: a tenth of what is left, at most
// 45 s.
func testDeadline(tb testing.TB) (time.Time, bool) {
	d, ok := tb.(interface{ Deadline() (time.Time, bool) })
	if !ok {
		return time.Time{}, false
	}
	end, ok := d.Deadline()
	if !ok {
		return time.Time{}, false
	}
	margin := min(time.Until(end)/10, 45*time.Second)
	return end.Add(-margin), true
}

// The polling of Poll: the first look again comes after pollFirst, each
// later one after twice the previous pause, at most pollMax (a condition
// that holds at once is seen at once, a long wait costs little CPU).
const (
	pollFirst = 2 * time.Millisecond
	pollMax   = 50 * time.Millisecond
)

// Poll calls cond until it holds or until has passed and reports whether
// it held. It is the one polling loop of the tests: Eventually and
// EventuallyWithin fail the test with it; a goroutine, which must not call
// t.Fatal, calls it directly.
func Poll(until time.Time, cond func() bool) bool {
	pause := pollFirst
	for !cond() {
		if time.Now().After(until) {
			return false
		}
		time.Sleep(pause)
		pause = min(2*pause, pollMax)
	}
	return true
}

// Eventually waits until cond holds, failing the test when it still does
// not at WaitDeadline: a condition that holds within seconds on a quiet
// machine may take minutes under -race on a loaded one.
func Eventually(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	start := time.Now()
	if !Poll(WaitDeadline(tb), cond) {
		tb.Fatalf("timed out waiting for %s (%s)", what, time.Since(start).Round(time.Second))
	}
}

// EventuallyWithin waits until cond holds, failing the test when it still
// does not after Within(tb, d): for a wait that has a bound of its own (a
// message that is published at once, a service that stops within its
// grace).
func EventuallyWithin(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	within := Within(tb, d)
	if !Poll(time.Now().Add(within), cond) {
		tb.Fatalf("timed out after %s waiting for %s", within, what)
	}
}
