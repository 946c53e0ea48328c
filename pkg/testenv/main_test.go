package testenv

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// parallelProbe, set in a test binary's environment, makes its TestMain
// call SetParallel(5) and TestParallelProbe print -parallel's value.
const parallelProbe = "TESTENV_PARALLEL_PROBE"

func TestMain(m *testing.M) {
	if os.Getenv(parallelProbe) != "" {
		SetParallel(5)
	}
	os.Exit(m.Run())
}

func TestParallelProbe(t *testing.T) {
	if os.Getenv(parallelProbe) == "" {
		t.Skip("run by TestSetParallelLeavesTheCommandLinesValue")
	}
	fmt.Printf("parallel=%s\n", flag.Lookup("test.parallel").Value)
}

// TestSetParallelLeavesTheCommandLinesValue: SetParallel sets -parallel
// for the tests to come, unless the command line gave it.
func TestSetParallelLeavesTheCommandLinesValue(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{{nil, "parallel=5"}, {[]string{"-test.parallel=3"}, "parallel=3"}} {
		cmd := exec.Command(os.Args[0], append([]string{"-test.run=^TestParallelProbe$"}, tc.args...)...)
		cmd.Env = append(os.Environ(), parallelProbe+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), tc.want+"\n") {
			t.Errorf("test binary %v: %v, output %q; want %q", tc.args, err, out, tc.want)
		}
	}
}

// TestTidyRunsInTheBackgroundOnceStarted: before start a removal runs at
// once; after it, tidy returns while the removal runs, and wait returns
// only once it ended.
func TestTidyRunsInTheBackgroundOnceStarted(t *testing.T) {
	t.Parallel()
	var td tidier
	ran := false
	td.tidy(t, func() error { ran = true; return nil })
	if !ran {
		t.Fatal("a removal before start did not run at once")
	}
	td.start()
	release := make(chan struct{})
	var done atomic.Bool
	td.tidy(t, func() error { <-release; done.Store(true); return nil })
	waited := make(chan struct{})
	go func() { td.wait(); close(waited) }()
	select {
	case <-waited:
		t.Fatal("wait returned while a removal was still running")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	select {
	case <-waited:
	case <-time.After(Within(t, 10*time.Second)):
		t.Fatal("wait did not return once the removal ended")
	}
	if !done.Load() {
		t.Fatal("wait returned before the removal ended")
	}
}
