package procs

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dubflow/dubflow/pkg/localstack"
	"github.com/dubflow/dubflow/services/chaos/internal/stack"
)

// Services are the programs the run starts, kills and restarts: the five
// workers and the helpers that end or re-drive tasks.
var Services = []string{"extract_audio", "asr", "translate", "tts", "mux_video", "reconciler", "dlq_recorder", "tts_requeue"}

// serviceArgs are the command-line arguments of a service (tts_requeue
// passes periodically instead of once).
var serviceArgs = map[string][]string{"tts_requeue": {"-every", "15s", "-min-idle", "1m"}}

// Proc is one service, restarted after each kill.
type Proc struct {
	Name  string
	path  string
	env   []string
	Ops   string // OPS_ADDR
	log   string
	mu    sync.Mutex
	cmd   *exec.Cmd
	done  chan struct{}
	kills int
	exits int
	// OnStart, when set, runs after each start.
	OnStart func()
}

// Procs are the running services.
type Procs struct {
	List []*Proc
}

// New prepares the services with env; spread gives each service the
// broker's nodes (AMQP_URL) in an order of its own, starting at a
// different node, as a load balancer in front of a cluster spreads its
// clients, instead of every service on the first node.
func New(bin, logs string, env map[string]string, spread bool) (*Procs, error) {
	ps := &Procs{}
	for i, name := range Services {
		port, err := localstack.FreePort()
		if err != nil {
			return nil, err
		}
		p := &Proc{Name: name, path: filepath.Join(bin, name), Ops: stack.HostPort(port), log: filepath.Join(logs, name+".log")}
		own := env
		if spread {
			own = maps.Clone(env)
			own["AMQP_URL"] = Rotate(env["AMQP_URL"], i)
		}
		p.env = append(Environ(own), "OPS_ADDR="+p.Ops)
		ps.List = append(ps.List, p)
	}
	return ps, nil
}

// Rotate returns the comma-separated list urls starting at its i-th entry
// (modulo its length).
func Rotate(urls string, i int) string {
	list := strings.Split(urls, ",")
	i %= len(list)
	return strings.Join(append(list[i:], list[:i]...), ",")
}

// start starts the process (it must not be running).
func (p *Proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	cmd := exec.Command(p.path, serviceArgs[p.Name]...)
	cmd.Env = p.env
	done, err := stack.StartLogged(cmd, p.log, fmt.Sprintf("=== chaos: start %s at %s", p.Name, time.Now().UTC().Format(time.RFC3339Nano)))
	if err != nil {
		return err
	}
	p.cmd, p.done = cmd, done
	if p.OnStart != nil {
		p.OnStart()
	}
	return nil
}

// running reports whether the process is alive.
func (p *Proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Ready reports whether the service answers /readyz (tts_requeue has no
// ops endpoint: alive is ready).
func (p *Proc) ready() bool {
	if !p.running() {
		return false
	}
	if p.Name == "tts_requeue" {
		return true
	}
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + p.Ops + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// signal sends sig and waits (bounded) until the process has exited; then
// its process group gets SIGKILL. SIGKILL goes to the whole group at once:
// ffmpeg, pocketsphinx, espeak-ng children die with the service, as they
// would with its container. SIGTERM goes to the service alone, as
// Kubernetes sends it to a container's main process, so the service
// decides what happens to the work of its children.
func (p *Proc) signal(sig syscall.Signal, wait time.Duration) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	if sig == syscall.SIGKILL {
		p.kills++
	}
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	if sig == syscall.SIGKILL {
		_ = syscall.Kill(-cmd.Process.Pid, sig)
	} else {
		_ = cmd.Process.Signal(sig)
	}
	select {
	case <-done:
	case <-time.After(wait):
	}
	// Whatever is left of the group (children the service did not stop).
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
}

// Supervise keeps p running until ctx ends: a kill request (the down
// time) SIGKILLs it and starts it again after that time; an exit of its own
// is counted and followed by a start a second later (as a container
// runtime would restart it).
func (p *Proc) Supervise(ctx context.Context, kills <-chan time.Duration, logf func(string, ...any)) {
	for {
		p.mu.Lock()
		done := p.done
		p.mu.Unlock()
		var down time.Duration
		select {
		case <-ctx.Done():
			return
		case down = <-kills:
			p.signal(syscall.SIGKILL, 10*time.Second)
		case <-done:
			p.mu.Lock()
			p.exits++
			code := p.cmd.ProcessState.ExitCode()
			p.mu.Unlock()
			logf("%s exited by itself (exit code %d); starting it again in 1s", p.Name, code)
			down = time.Second
		}
		stack.SleepCtx(ctx, down)
		if ctx.Err() != nil {
			return
		}
		if err := p.start(); err != nil {
			logf("%v", err)
		}
	}
}

// StartAll starts every service.
func (ps *Procs) StartAll() error {
	for _, p := range ps.List {
		if err := p.start(); err != nil {
			return err
		}
	}
	return nil
}

// StopAll sends SIGTERM to every service and waits for them.
func (ps *Procs) StopAll() {
	var wg sync.WaitGroup
	for _, p := range ps.List {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if p.running() {
				p.signal(syscall.SIGTERM, 30*time.Second)
			}
		}()
	}
	wg.Wait()
}

func (ps *Procs) ByName(name string) *Proc {
	for _, p := range ps.List {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Environ turns env into KEY=value lines, with PATH, HOME and LANG from
// this process.
func Environ(env map[string]string) []string {
	var out []string
	for _, k := range []string{"PATH", "HOME", "LANG"} {
		if v := os.Getenv(k); v != "" {
			out = append(out, k+"="+v)
		}
	}
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// AllReady reports whether every service answers /readyz.
func (ps *Procs) AllReady() bool {
	for _, p := range ps.List {
		if !p.ready() {
			return false
		}
	}
	return true
}

// SelfExits is how often the service exited by itself (not killed).
func (p *Proc) SelfExits() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exits
}
