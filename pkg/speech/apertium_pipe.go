package speech

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// This file keeps Apertium's translation pipelines running between calls.
// `apertium <mode>` is a shell script that starts a dozen programs, each of
// which loads its part of the language data before the first word goes
// through: that start, not the translating, is most of what one call costs.
// The programs support null-flush mode (-z): a NUL byte after a text makes
// every stage finish it and pass the NUL on, so one pipeline can translate
// text after text. Only the light text deformatter and reformatter
// (apertium-destxt, apertium-retxt, which do not pass NULs on) still run
// once per call, exactly as the script runs them, so the output is the
// script's.

// defaultModesDir is where the Debian packages install Apertium's modes.
const defaultModesDir = "/usr/share/apertium/modes"

// pipePool holds the idle pipelines of one mode and counts those in use.
type pipePool struct {
	idle  []*pipeline
	total int
	// freed is signalled when a pipeline comes back or goes away.
	freed chan struct{}
}

// pipeline is one running `apertium-wblank-mode -z <mode>` pipeline.
type pipeline struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	idle  *time.Timer
}

// modeFile returns the mode file of mode, or "" when it is not installed
// there (then the script is run, which reports the missing mode).
func (a *Apertium) modeFile(mode string) string {
	dir := a.ModesDir
	if dir == "" {
		dir = defaultModesDir
	}
	f := filepath.Join(dir, mode+".mode")
	if _, err := os.Stat(f); err != nil {
		return ""
	}
	return f
}

// translatePiped translates text (paragraphs separated by blank lines) on a
// long-lived pipeline of mode.
func (a *Apertium) translatePiped(ctx context.Context, modeFile, mode string, text []byte) ([]byte, error) {
	in, err := run(ctx, text, "apertium-destxt")
	if err != nil {
		return nil, err
	}
	p, err := a.acquire(ctx, modeFile, mode)
	if err != nil {
		return nil, err
	}
	out, err := p.translate(ctx, in)
	a.put(mode, p, err == nil)
	if err != nil {
		return nil, err
	}
	return run(ctx, out, "apertium-retxt")
}

// acquire takes an idle pipeline of mode, or starts one while fewer than
// Pipelines run, or waits for one to come back.
func (a *Apertium) acquire(ctx context.Context, modeFile, mode string) (*pipeline, error) {
	for {
		a.mu.Lock()
		if a.pools == nil {
			a.pools = map[string]*pipePool{}
		}
		pool := a.pools[mode]
		if pool == nil {
			pool = &pipePool{freed: make(chan struct{}, 1)}
			a.pools[mode] = pool
		}
		if n := len(pool.idle); n > 0 {
			p := pool.idle[n-1]
			pool.idle = pool.idle[:n-1]
			p.idle.Stop()
			a.mu.Unlock()
			return p, nil
		}
		if pool.total < a.pipelines() {
			pool.total++
			a.started++
			a.mu.Unlock()
			p, err := startPipeline(modeFile)
			if err != nil {
				a.put(mode, nil, false)
				return nil, err
			}
			return p, nil
		}
		freed := pool.freed
		a.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for an apertium %s pipeline: %w", mode, ctx.Err())
		case <-freed:
		}
	}
}

// put gives p back to its pool when it is fine, else stops it (p may be
// nil: a pipeline that never started).
func (a *Apertium) put(mode string, p *pipeline, fine bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	pool := a.pools[mode]
	if fine && !a.closed {
		pool.idle = append(pool.idle, p)
		p.idle = time.AfterFunc(a.idleTimeout(), func() { a.expire(mode, p) })
	} else {
		pool.total--
		if p != nil {
			go p.stop()
		}
	}
	select {
	case pool.freed <- struct{}{}:
	default:
	}
}

// expire stops p if it is still idle.
func (a *Apertium) expire(mode string, p *pipeline) {
	a.mu.Lock()
	defer a.mu.Unlock()
	pool := a.pools[mode]
	for i, q := range pool.idle {
		if q == p {
			pool.idle = append(pool.idle[:i], pool.idle[i+1:]...)
			pool.total--
			go p.stop()
			return
		}
	}
}

// Close stops the pipelines that are idle; those in use stop when their
// call returns. Translate still works after Close, one process per call.
func (a *Apertium) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	for _, pool := range a.pools {
		for _, p := range pool.idle {
			p.idle.Stop()
			pool.total--
			go p.stop()
		}
		pool.idle = nil
	}
	return nil
}

// Started counts the pipelines started so far.
func (a *Apertium) Started() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.started
}

// Running counts the pipelines running now, idle or in use.
func (a *Apertium) Running() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, pool := range a.pools {
		n += pool.total
	}
	return n
}

func (a *Apertium) pipelines() int {
	if a.Pipelines == 0 {
		return 1
	}
	return a.Pipelines
}

func (a *Apertium) idleTimeout() time.Duration {
	if a.IdleTimeout <= 0 {
		return time.Minute
	}
	return a.IdleTimeout
}

// startPipeline starts the null-flush pipeline of modeFile, with the
// options `apertium -u` gives it (no unknown-word marks), in a process
// group of its own so that stopping it stops every stage.
func startPipeline(modeFile string) (*pipeline, error) {
	script, err := exec.Command("apertium-wblank-mode", "-z", modeFile).Output()
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return nil, fmt.Errorf("start apertium pipeline: %w (install the Debian package apertium)", err)
		}
		return nil, fmt.Errorf("start apertium pipeline for %s: %w", modeFile, err)
	}
	// $1 is the generator's option (-n: no unknown-word marks, as -u),
	// $2 the tagger's (none).
	cmd := exec.Command("bash", "-c", string(script), "apertium", "-n", "")
	cmd.Env = append(os.Environ(), "LC_CTYPE=C.UTF-8")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start apertium pipeline for %s: %w", modeFile, err)
	}
	return &pipeline{cmd: cmd, stdin: stdin, out: bufio.NewReaderSize(stdout, 64<<10)}, nil
}

// translate sends one deformatted text through p and returns what comes
// back before the NUL that ends it. When ctx ends first, p is stopped (its
// state is unknown) and the caller must not use it again.
func (p *pipeline) translate(ctx context.Context, in []byte) ([]byte, error) {
	stop := context.AfterFunc(ctx, p.kill)
	defer stop()
	type result struct {
		out []byte
		err error
	}
	got := make(chan result, 1)
	go func() {
		out, err := p.out.ReadBytes(0)
		got <- result{out, err}
	}()
	_, werr := p.stdin.Write(append(in, 0))
	res := <-got
	if ctx.Err() != nil {
		return nil, fmt.Errorf("apertium pipeline: %w", ctx.Err())
	}
	if werr != nil || res.err != nil {
		return nil, fmt.Errorf("apertium pipeline ended: %w", errors.Join(werr, res.err))
	}
	return res.out[:len(res.out)-1], nil
}

// kill stops every stage of p at once.
func (p *pipeline) kill() {
	if p.cmd.Process != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// stop ends p: its input closes, so every stage finishes and exits; what
// does not within a few seconds is killed.
func (p *pipeline) stop() {
	_ = p.stdin.Close()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, p.out)
		_ = p.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		p.kill()
		<-done
	}
}
