package media

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// zygoteLibForTests is the fork server library the tests build (TestMain),
// or "" when there is no C compiler.
var zygoteLibForTests string

// buildZygoteLib builds the library with the script `make build` runs.
func buildZygoteLib() (string, error) {
	dir, err := os.MkdirTemp("", "ffzygote-test-")
	if err != nil {
		return "", err
	}
	if out, err := exec.Command(filepath.Join("..", "..", "scripts", "ffzygote.sh"), dir).CombinedOutput(); err != nil {
		return "", errors.New(string(out))
	}
	lib := filepath.Join(dir, ZygoteLibrary)
	if _, err := os.Stat(lib); err != nil {
		return "", nil // no C compiler: the tests run ffmpeg per job
	}
	return lib, nil
}

// useZygote makes this package run ffmpeg and ffprobe through lib's fork
// servers ("" for none) until the test ends, with servers of its own.
func useZygote(t *testing.T, lib string) {
	t.Helper()
	zygotes.Lock()
	old := zygotes.lib
	zygotes.Unlock()
	setZygoteLib("", zerolog.Nop())
	setZygoteLib(lib, zerolog.Nop())
	t.Cleanup(func() {
		setZygoteLib("", zerolog.Nop())
		setZygoteLib(old, zerolog.Nop())
	})
}

func needZygote(t *testing.T) {
	t.Helper()
	if zygoteLibForTests == "" {
		t.Fatal("no fork server library: TestMain could not build it (no C compiler?)")
	}
	useZygote(t, zygoteLibForTests)
}

// ppid is the parent of pid, from /proc.
func ppid(t *testing.T, pid int) int {
	t.Helper()
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+2:]))
	n, _ := strconv.Atoi(f[1])
	return n
}

func TestZygoteRunsJobsAsItsChildren(t *testing.T) {
	needZygote(t)
	samples := bytes.Repeat([]byte{1, 2, 3, 4}, 4000)
	for round := range 3 { // the same server serves one job after another
		in, feed := io.Pipe()
		var out bytes.Buffer
		c := &command{ctx: context.Background(), name: "ffmpeg", args: []string{"-nostdin", "-v", "error",
			"-f", "s16le", "-ar", "8000", "-ac", "1", "-i", "pipe:0", "-f", "s16le", "pipe:1"}, Stdin: in, Stdout: &out}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		if c.job == nil {
			t.Fatal("ffmpeg did not run in its fork server")
		}
		z := zygoteFor("ffmpeg")
		if got, want := ppid(t, c.job.pid), z.pid(); got != want {
			t.Fatalf("round %d: the job's parent is %d, want the fork server %d", round, got, want)
		}
		if _, err := feed.Write(samples); err != nil {
			t.Fatal(err)
		}
		feed.Close()
		if err := c.Wait(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Bytes(), samples) {
			t.Fatalf("round %d: %d bytes out, want the %d in", round, out.Len(), len(samples))
		}
	}
}

func TestZygoteCancelKillsTheJob(t *testing.T) {
	needZygote(t)
	ctx, cancel := context.WithCancel(context.Background())
	c := &command{ctx: ctx, name: "ffmpeg", args: []string{"-nostdin", "-v", "error", "-re",
		"-f", "lavfi", "-i", "sine=duration=120", "-f", "null", "-"}}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if c.job == nil {
		t.Fatal("ffmpeg did not run in its fork server")
	}
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	err := c.Wait()
	var exit *ExitError
	if !errors.As(err, &exit) || exit.Exited() || exit.Status.Signal() != syscall.SIGKILL {
		t.Fatalf("Wait after cancel = %v, want the job killed", err)
	}
	if waited := time.Since(start); waited > 30*time.Second {
		t.Fatalf("the cancelled job ended after %s", waited)
	}
	if err := syscall.Kill(c.job.pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("job %d still exists after Wait: %v", c.job.pid, err)
	}
}

func TestZygoteExitStatusAndStderr(t *testing.T) {
	needZygote(t)
	_, stderr, err := run(context.Background(), time.Minute, nil, "ffmpeg", "-v", "error", "-i", "file:/nonexistent/x.mp4")
	var exit *ExitError
	if !errors.As(err, &exit) || !exit.Exited() || exit.Status.ExitStatus() == 0 {
		t.Fatalf("err = %v, want ffmpeg's exit status", err)
	}
	if !strings.Contains(stderr, "No such file") {
		t.Fatalf("stderr %q does not say why", stderr)
	}
}

func TestZygoteRestartsAfterItEnded(t *testing.T) {
	needZygote(t)
	if _, _, err := run(context.Background(), time.Minute, nil, "ffmpeg", "-version"); err != nil {
		t.Fatal(err)
	}
	z := zygoteFor("ffmpeg")
	first := z.pid()
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-z.done
	out, _, err := run(context.Background(), time.Minute, nil, "ffmpeg", "-version")
	if err != nil || !bytes.HasPrefix(out, []byte("ffmpeg version")) {
		t.Fatalf("after the server was killed: %v %q", err, out)
	}
	if again := z.pid(); again == first || again == 0 {
		t.Fatalf("server pid %d after %d was killed: want a new one", again, first)
	}
}

func TestZygoteBrokenLibraryFallsBackToExec(t *testing.T) {
	bad := filepath.Join(t.TempDir(), ZygoteLibrary)
	if err := os.WriteFile(bad, []byte("not a library"), 0o644); err != nil {
		t.Fatal(err)
	}
	useZygote(t, bad)
	out, _, err := run(context.Background(), time.Minute, nil, "ffmpeg", "-version")
	if err != nil || !bytes.HasPrefix(out, []byte("ffmpeg version")) {
		t.Fatalf("with a broken library: %v %q", err, out)
	}
	if zygoteFor("ffmpeg") != nil {
		t.Fatal("a server that sent no ready byte is still used")
	}
}

func TestUseZygote(t *testing.T) {
	t.Cleanup(func() { setZygoteLib(zygoteLibForTests, zerolog.Nop()) })
	if lib, err := UseZygote("off", zerolog.Nop()); lib != "" || err != nil {
		t.Fatalf("UseZygote(off) = %q, %v", lib, err)
	}
	if _, err := UseZygote("/nonexistent/"+ZygoteLibrary, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "FFMPEG_ZYGOTE") {
		t.Fatalf("a missing library: %v, want an error naming FFMPEG_ZYGOTE", err)
	}
	if zygoteLibForTests != "" {
		if lib, err := UseZygote(zygoteLibForTests, zerolog.Nop()); lib != zygoteLibForTests || err != nil {
			t.Fatalf("UseZygote(%s) = %q, %v", zygoteLibForTests, lib, err)
		}
	}
	// "": next to the test binary, where no library lies.
	if lib, err := UseZygote("", zerolog.Nop()); lib != "" || err != nil {
		t.Fatalf(`UseZygote("") = %q, %v with no library next to the program`, lib, err)
	}
}

func TestZygoteOffRunsExec(t *testing.T) {
	useZygote(t, "")
	c := &command{ctx: context.Background(), name: "ffmpeg", args: []string{"-version"}}
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	if c.cmd == nil || c.job != nil {
		t.Fatal("without a library ffmpeg did not run as its own process")
	}
}

// A wrapper script found first on PATH (as TestProcessStarts's shims, or
// an operator's) runs its shell with the library loaded: the shell must
// run its script, and the tool it runs serves.
func TestZygoteBehindAWrapperScript(t *testing.T) {
	real, err := exec.LookPath("ffmpeg")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	marker := filepath.Join(dir, "wrapped")
	script := "#!/bin/sh\necho started >> '" + marker + "'\nexec '" + real + "' \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "ffmpeg"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	needZygote(t)
	for range 3 {
		out, _, err := run(context.Background(), time.Minute, nil, "ffmpeg", "-version")
		if err != nil || !bytes.HasPrefix(out, []byte("ffmpeg version")) {
			t.Fatalf("behind the wrapper: %v %q", err, out)
		}
	}
	if zygoteFor("ffmpeg").pid() == 0 {
		t.Fatal("no fork server runs behind the wrapper")
	}
	raw, err := os.ReadFile(marker)
	if err != nil || strings.Count(string(raw), "started") != 1 {
		t.Fatalf("the wrapper ran %q times (%v), want once: the server's start", raw, err)
	}
}

// A Stdin that never ends does not hold Wait once the tool has ended
// without reading it (as with os/exec).
func TestZygoteWaitDoesNotWaitForAnEndlessStdin(t *testing.T) {
	needZygote(t)
	in, feed := io.Pipe() // nothing is ever written: the feed blocks reading it
	t.Cleanup(func() { feed.Close() })
	c := &command{ctx: context.Background(), name: "ffmpeg", args: []string{"-version"}, Stdin: in}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if c.job == nil {
		t.Fatal("ffmpeg did not run in its fork server")
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("Wait still waits for the stdin that never ends")
	}
}
