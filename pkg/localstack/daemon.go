package localstack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"syscall"
	"time"
)

// daemon is a server process this package started: its own process group,
// its output appended to a log file.
type daemon struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// startDaemon starts cmd in its own process group with its output appended
// to the file at log; as, when not empty and the process runs as root,
// names the user it runs as (PostgreSQL refuses to run as root).
func startDaemon(cmd *exec.Cmd, log, as string) (*daemon, error) {
	f, err := os.OpenFile(log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log %s: %w", log, err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if as != "" && os.Getuid() == 0 {
		cred, err := credential(as)
		if err != nil {
			f.Close()
			return nil, err
		}
		cmd.SysProcAttr.Credential = cred
	}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	d := &daemon{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(d.done)
	}()
	return d, nil
}

// credential is the uid and gid of the named user.
func credential(name string) (*syscall.Credential, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("look up user %s: %w", name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// alive reports whether the process has not exited.
func (d *daemon) alive() bool {
	if d == nil {
		return false
	}
	select {
	case <-d.done:
		return false
	default:
		return true
	}
}

// signal sends sig to the process group and waits, up to wait, until the
// process has exited; past wait the group gets SIGKILL.
func (d *daemon) signal(sig syscall.Signal, wait time.Duration) {
	if !d.alive() {
		return
	}
	_ = syscall.Kill(-d.cmd.Process.Pid, sig)
	select {
	case <-d.done:
	case <-time.After(wait):
		_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
		<-d.done
	}
}

// WaitFor polls cond every 100 ms until it holds, ctx ends or within has
// passed; what names the condition in the error.
func WaitFor(ctx context.Context, within time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %s", what, within)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// httpStatus is the status code of a GET of url, 0 when there is no
// answer within two seconds.
func httpStatus(url string) int {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// killPID sends SIGKILL to pid and waits until it is gone (a process that
// is not a child of this one is waited for through /proc).
func killPID(pid int) error {
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill %d: %w", pid, err)
	}
	return WaitFor(context.Background(), 30*time.Second, fmt.Sprintf("process %d gone after SIGKILL", pid),
		func() bool { return !ProcessAlive(pid) })
}
