package browsertest

import (
	"crypto/rand"
	"encoding/hex"
	"maps"
	"os"
	"testing"

	"github.com/dubflow/dubflow/pkg/testenv"
)

// chromium is Debian's browser; nothing here downloads one.
const chromium = "/usr/bin/chromium"

// services are what the console needs to show a task going to done: the
// dubbing chain, the DLQ recorder (dead letters, failed tasks) and the
// console itself.
var services = []string{"extract_audio", "asr", "translate", "tts", "mux_video", "dlq_recorder", "console"}

var (
	binDir   string
	buildErr error
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if _, err := os.Stat(chromium); err != nil {
		return m.Run() // every test skips with the reason
	}
	binDir, buildErr = testenv.SharedBinaries(services...)
	return m.Run()
}

// needBrowser skips the test when Debian's chromium is not installed —
// fails it in CI (CI set), where `make test` installs chromium — and
// fails it when the services could not be built.
func needBrowser(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(chromium); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI: browser tests need Debian's chromium at %s (`make test` installs it): %v", chromium, err)
		}
		t.Skipf("browser tests need Debian's chromium at %s (apt-get install chromium): %v", chromium, err)
	}
	if buildErr != nil {
		t.Fatalf("build the services: %v", buildErr)
	}
}

// stack is a fresh database, virtual host and bucket with the services
// running on them as real processes.
type stack struct {
	env     map[string]string
	db      *testenv.Database
	bucket  *testenv.Bucket
	console string // the console's base URL
	token   string // its admin token (DUBFLOW_API_TOKEN)
}

func newStack(t *testing.T) *stack {
	t.Helper()
	return newStackOf(t, services, nil)
}

// newStackOf is newStack running only names, the console (if named) with
// consoleEnv added.
func newStackOf(t *testing.T, names []string, consoleEnv map[string]string) *stack {
	t.Helper()
	return newStackWith(t, names, consoleEnv, nil)
}

// newStackWith is newStackOf with common added to every service's
// environment.
func newStackWith(t *testing.T, names []string, consoleEnv, common map[string]string) *stack {
	t.Helper()
	b := testenv.NewBackends(t)
	// One consumer a worker (the default is one a core): the pages' queue
	// table counts them back after a resume.
	env := b.Env(map[string]string{"LOG_LEVEL": "info", "SHUTDOWN_GRACE_SECONDS": "10", "WORKER_CONCURRENCY": "1"})
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "LANG"} {
		if v := os.Getenv(k); v != "" {
			env[k] = v
		}
	}
	maps.Copy(env, common)
	token := make([]byte, 24)
	if _, err := rand.Read(token); err != nil {
		t.Fatal(err)
	}
	s := &stack{env: env, db: b.DB, bucket: b.Bucket, token: hex.EncodeToString(token)}
	addr := testenv.FreeAddr(t)
	s.console = "http://" + addr
	for _, name := range names {
		extra := map[string]string{}
		if name == "console" {
			extra = map[string]string{"CONSOLE_HTTP_ADDR": addr, "DUBFLOW_API_TOKEN": s.token}
			maps.Copy(extra, consoleEnv)
		}
		s.start(t, name, extra)
	}
	return s
}

// start runs one service with its own ops port, waits until /readyz
// answers 200, and stops it with SIGTERM when the test ends.
func (s *stack) start(t *testing.T, name string, extra map[string]string) {
	t.Helper()
	env := maps.Clone(s.env)
	maps.Copy(env, extra)
	p := testenv.StartProc(t, binDir, name, env)
	t.Cleanup(func() { p.Stop(t, true) })
	p.WaitReady(t)
}
