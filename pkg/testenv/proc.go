package testenv

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Proc is a service binary running as a process, its output in a log file
// of the test's.
type Proc struct {
	Name string
	Addr string // OPS_ADDR: /healthz, /readyz, /metrics
	Cmd  *exec.Cmd
	Log  string // the log file's path

	done     chan struct{}
	err      error
	stopOnce sync.Once
}

// StartProc runs dir/name with env and OPS_ADDR set to a free address, its
// output going to a log file of tb's. It does not wait until the service
// is ready (WaitReady) nor stop it (Stop).
func StartProc(tb testing.TB, dir, name string, env map[string]string) *Proc {
	tb.Helper()
	addr := FreeAddr(tb)
	logPath := filepath.Join(tb.TempDir(), name+".log")
	out, err := os.Create(logPath)
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(dir, name))
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, "OPS_ADDR="+addr)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		out.Close()
		tb.Fatalf("start %s: %v", name, err)
	}
	p := &Proc{Name: name, Addr: addr, Cmd: cmd, Log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		out.Close()
		close(p.done)
	}()
	return p
}

// Exited reports whether the process has ended, and how.
func (p *Proc) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// WaitReady waits until the service's /readyz answers 200, failing the test
// (with the end of the log) when the process ends first or is not ready
// within Within(60 s).
func (p *Proc) WaitReady(tb testing.TB) {
	tb.Helper()
	WaitReady(tb, p.Name, p.Addr, p.done, func() string { return fmt.Sprintf("(%v)\n%s", p.err, Tail(p.Log, 40)) })
}

// Stop sends SIGTERM and expects a clean exit within Within(30 s), then
// kills the process; a failed test gets the end of the log. Stop does
// nothing after the first call; exitedEarly is whether a process that
// ended before Stop fails the test.
func (p *Proc) Stop(tb testing.TB, exitedEarly bool) {
	tb.Helper()
	p.stopOnce.Do(func() { p.stop(tb, exitedEarly) })
}

func (p *Proc) stop(tb testing.TB, exitedEarly bool) {
	if ended, err := p.Exited(); ended {
		if exitedEarly {
			tb.Errorf("%s exited before the end of the test (%v):\n%s", p.Name, err, Tail(p.Log, 40))
		}
		return
	}
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	grace := Within(tb, 30*time.Second)
	select {
	case <-p.done:
		if p.err != nil {
			tb.Errorf("%s: exit after SIGTERM: %v\n%s", p.Name, p.err, Tail(p.Log, 40))
		}
	case <-time.After(grace):
		_ = p.Cmd.Process.Kill()
		<-p.done
		tb.Errorf("%s did not stop within %s of SIGTERM:\n%s", p.Name, grace, Tail(p.Log, 40))
	}
	if tb.Failed() {
		tb.Logf("log of %s:\n%s", p.Name, Tail(p.Log, 60))
	}
}

// WaitReady polls http://addr/readyz until it answers 200. It fails the
// test when exited is closed first (the service ended) or after Within(60
// s), with what why says (a log's end, an error).
func WaitReady(tb testing.TB, name, addr string, exited <-chan struct{}, why func() string) {
	tb.Helper()
	url := "http://" + addr + "/readyz"
	within := Within(tb, 60*time.Second)
	deadline := time.Now().Add(within)
	for {
		select {
		case <-exited:
			tb.Fatalf("%s exited at start:\n%s", name, why())
		default:
		}
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s not ready at %s after %s:\n%s", name, url, within, why())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Tail returns the last n lines of a file (its error, when it cannot be
// read).
func Tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
