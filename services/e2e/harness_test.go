package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/testenv"
)

// workers are the dubbing chain's services, in pipeline order.
var workers = []string{"extract_audio", "asr", "translate", "tts", "mux_video"}

// helpers are the other services an end-to-end run starts: the DLQ recorder
// marks tasks failed when their messages are dead-lettered.
var helpers = []string{"dlq_recorder"}

// binDir holds the binaries TestMain built.
var binDir string

// buildErr explains why the binaries could not be built.
var buildErr error

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	binDir, buildErr = build()
	// go test's -parallel stays (each test runs a whole stack of
	// processes); what ended tests leave behind goes in the background.
	return testenv.Main(m, 0)
}

// build compiles every service the tests run into the binaries folder the
// test packages share (testenv.SharedBinaries).
func build() (string, error) {
	names := append(append(append([]string{}, workers...), helpers...), "dubctl")
	return testenv.SharedBinaries(names...)
}

// needBinaries fails the test when the build in TestMain failed.
func needBinaries(tb testing.TB) {
	tb.Helper()
	if buildErr != nil {
		tb.Fatalf("build the services: %v", buildErr)
	}
}

// fixture returns the path of a shared speech fixture: from
// DUBFLOW_FIXTURES, else shared/fixtures/speech beside the checkout.
func fixture(tb testing.TB, name string) string {
	tb.Helper()
	dirs := []string{os.Getenv("DUBFLOW_FIXTURES")}
	if root, err := testenv.RepoRoot(); err == nil {
		for d := root; ; d = filepath.Dir(d) {
			dirs = append(dirs, filepath.Join(d, "shared", "fixtures", "speech"))
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		p := filepath.Join(d, name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	tb.Fatalf("speech fixture %s not found: set DUBFLOW_FIXTURES to the folder holding it "+
		"(shared/fixtures/speech beside the checkout)", name)
	return ""
}

// stack is a fresh database, virtual host and bucket with dubflow's
// processes running on them.
type stack struct {
	env    map[string]string
	db     *testenv.Database
	bucket *testenv.Bucket
	procs  map[string]*proc
}

// newStack prepares the isolated backing services; start runs processes.
func newStack(tb testing.TB, extra map[string]string) *stack {
	tb.Helper()
	needBinaries(tb)
	b := testenv.NewBackends(tb)
	env := b.Env(map[string]string{"LOG_LEVEL": "info", "SHUTDOWN_GRACE_SECONDS": "10"})
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "LANG"} {
		if v := os.Getenv(k); v != "" {
			env[k] = v
		}
	}
	// Engine and step settings pass through, so a benchmark can compare
	// them (ASR_CHUNK_SECONDS=30 make bench ..., FFMPEG_ZYGOTE=off).
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		for _, prefix := range []string{"ASR_", "POCKETSPHINX_", "TRANSLATE_", "TTS_", "MUX_", "WORKER_", "FFMPEG_"} {
			if strings.HasPrefix(k, prefix) {
				env[k] = v
			}
		}
	}
	for k, v := range extra {
		env[k] = v
	}
	return &stack{env: env, db: b.DB, bucket: b.Bucket, procs: map[string]*proc{}}
}

// proc is one running service.
type proc struct{ *testenv.Proc }

// start runs the named services (each with its own OPS_ADDR), waits until
// each is ready, and stops them when the test ends.
func (s *stack) start(tb testing.TB, names ...string) {
	tb.Helper()
	for _, name := range names {
		p := &proc{testenv.StartProc(tb, binDir, name, s.env)}
		s.procs[name] = p
		tb.Cleanup(func() { p.Stop(tb, true) })
	}
	for _, name := range names {
		s.procs[name].WaitReady(tb)
	}
}

// dubctl runs the dubctl binary with the stack's environment and returns
// its stdout, stderr and exit code.
func (s *stack) dubctl(tb testing.TB, ctx context.Context, args ...string) (string, string, int) {
	tb.Helper()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "dubctl"), args...)
	// What dubctl writes by default (wait's download of the outputs) goes to
	// a folder of the test's, never into the package's source folder.
	cmd.Dir = tb.TempDir()
	for k, v := range s.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return stdout.String(), stderr.String(), 0
	case errors.As(err, &exit):
		return stdout.String(), stderr.String(), exit.ExitCode()
	default:
		tb.Fatalf("run dubctl %v: %v", args, err)
		return "", "", -1
	}
}

// hwm returns the peak resident memory (VmHWM) of a running process, in
// bytes.
func (p *proc) hwm() (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.Cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse VmHWM %q: %w", v, err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", p.Cmd.Process.Pid)
}
