package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"
)

// DefaultAMQPURL is the local stack's broker.
const DefaultAMQPURL = "amqp://guest:guest@localhost:5672/"

// rabbitctlTimeout bounds one rabbitmqctl call; the CLI starts an Erlang VM
// each time, which takes about a second on a quiet machine and tens of
// seconds on a loaded one (make test beside stress-ng and other builds).
const rabbitctlTimeout = 2 * time.Minute

// nodeStartTimeout bounds how long a private node may take to boot. It only
// stops a test from hanging on a node that never comes up: a node booting on
// a machine with a load average of 100 was seen to need more than 60 s.
const nodeStartTimeout = 5 * time.Minute

// AMQP returns the URL of a fresh virtual host on the broker of AMQP_URL,
// with the URL's user granted every permission on it. The virtual host is
// deleted when the test ends, with everything declared in it.
//
// The virtual host is created with rabbitmqctl, so the broker must be a node
// on this machine: the system node by default, or the node named by
// RABBITMQ_NODENAME (the variable rabbitmqctl itself reads, which
// scripts/stack.sh writes to .devstack/env when it starts a private node).
func AMQP(t testing.TB) string {
	t.Helper()
	base := Env("AMQP_URL", DefaultAMQPURL)
	uri, err := amqp.ParseURI(base)
	if err != nil {
		t.Fatalf("testenv: parse AMQP_URL: %v", err)
	}
	node := os.Getenv("RABBITMQ_NODENAME")
	vhost := "dubflow-test-" + strings.ReplaceAll(uuid.NewString()[:18], "-", "")
	if err := rabbitctl(node, "add_vhost", vhost); err != nil {
		t.Fatalf("testenv: create virtual host on the broker of %s (is the local stack up? run `scripts/stack.sh up --infra-only`; "+
			"for a node other than the machine's default, set RABBITMQ_NODENAME): %v", redactURL(uri), err)
	}
	t.Cleanup(func() {
		if err := rabbitctl(node, "delete_vhost", vhost); err != nil {
			t.Logf("testenv: delete virtual host %s: %v", vhost, err)
		}
	})
	if err := rabbitctl(node, "set_permissions", "-p", vhost, uri.Username, ".*", ".*", ".*"); err != nil {
		t.Fatalf("testenv: grant %s on virtual host %s: %v", uri.Username, vhost, err)
	}
	uri.Vhost = vhost
	url := uri.String()
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatalf("testenv: connect to new virtual host %s at %s:%d (rabbitmqctl created it on node %q; "+
			"is that the node serving AMQP_URL? set RABBITMQ_NODENAME): %v", vhost, uri.Host, uri.Port, nodeOrDefault(node), err)
	}
	_ = conn.Close()
	return url
}

// Rabbit is a private RabbitMQ node for tests that stop, restart or kill
// the broker without disturbing anyone else. Its methods must be called
// from the test's goroutine, since they fail the test on error.
type Rabbit struct {
	t        testing.TB
	node     string
	port     int
	distPort int
	dir      string
}

// PrivateRabbit starts a private rabbitmq-server with its own node name,
// its own AMQP and distribution ports, and its data in a fresh folder owned
// by the rabbitmq user. It takes about five seconds. The node is stopped
// and its data removed when the test ends.
func PrivateRabbit(t testing.TB) *Rabbit {
	t.Helper()
	if _, err := exec.LookPath("rabbitmq-server"); err != nil {
		t.Fatalf("testenv: rabbitmq-server not found (install the Debian package rabbitmq-server, or run scripts/stack.sh up --infra-only): %v", err)
	}
	dir, err := os.MkdirTemp("/tmp", "dubflow-rabbit-")
	if err != nil {
		t.Fatalf("testenv: create rabbit data folder: %v", err)
	}
	r := &Rabbit{t: t, dir: dir}
	t.Cleanup(r.cleanup)
	r.node = "dubflow-test-" + strings.ReplaceAll(uuid.NewString()[:13], "-", "") + "@localhost"
	if r.port, err = freePort(); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	if r.distPort, err = freePort(); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	if err := r.prepare(); err != nil {
		t.Fatalf("testenv: prepare private rabbit in %s: %v", dir, err)
	}
	r.Start()
	return r
}

// URL returns the AMQP URL of the private node's default virtual host.
func (r *Rabbit) URL() string {
	return fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", r.port)
}

// Node returns the node name, for rabbitmqctl -n.
func (r *Rabbit) Node() string {
	return r.node
}

// Start starts the node and waits until it accepts AMQP connections.
func (r *Rabbit) Start() {
	r.t.Helper()
	if err := r.start(); err != nil {
		r.t.Fatalf("testenv: start private rabbit %s: %v\n%s", r.node, err, r.logTail())
	}
}

// Stop stops the node cleanly and waits until its process has exited.
func (r *Rabbit) Stop() {
	r.t.Helper()
	if err := rabbitctl(r.node, "stop", r.pidFile()); err != nil {
		r.t.Fatalf("testenv: stop private rabbit %s: %v", r.node, err)
	}
}

// Kill ends the node with SIGKILL, as a crash would, and waits until its
// process is gone.
func (r *Rabbit) Kill() {
	r.t.Helper()
	if err := r.kill(); err != nil {
		r.t.Fatalf("testenv: kill private rabbit %s: %v", r.node, err)
	}
}

// Restart stops the node cleanly and starts it again on the same ports and
// data, so durable queues and messages survive.
func (r *Rabbit) Restart() {
	r.t.Helper()
	r.Stop()
	r.Start()
}

func (r *Rabbit) prepare() error {
	for _, d := range []string{"mnesia", "log"} {
		if err := os.Mkdir(filepath.Join(r.dir, d), 0o755); err != nil {
			return err
		}
	}
	files := map[string]string{
		"enabled_plugins": "[].\n",
		// The machine's own config may pin listeners to 5672; ours
		// replaces it.
		"rabbitmq.conf": fmt.Sprintf("listeners.tcp.local = 127.0.0.1:%d\n", r.port),
		// Keep the machine's rabbitmq-env.conf (node name, ports) out.
		"rabbitmq-env.conf": "export ERL_FLAGS=\"-kernel inet_dist_use_interface {127,0,0,1}\"\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(r.dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	if err := os.Chmod(r.dir, 0o755); err != nil {
		return err
	}
	return Chown(r.dir, "rabbitmq")
}

func (r *Rabbit) start() error {
	ctx, cancel := context.WithTimeout(context.Background(), rabbitctlTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "rabbitmq-server", "-detached")
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(),
		"RABBITMQ_NODENAME="+r.node,
		"RABBITMQ_DIST_PORT="+strconv.Itoa(r.distPort),
		"RABBITMQ_CONFIG_FILE="+filepath.Join(r.dir, "rabbitmq.conf"),
		"RABBITMQ_CONF_ENV_FILE="+filepath.Join(r.dir, "rabbitmq-env.conf"),
		"RABBITMQ_MNESIA_BASE="+filepath.Join(r.dir, "mnesia"),
		"RABBITMQ_LOG_BASE="+filepath.Join(r.dir, "log"),
		"RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(r.dir, "enabled_plugins"),
		"RABBITMQ_PID_FILE="+r.pidFile(),
	)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("rabbitmq-server -detached: %w: %s", err, bytes.TrimSpace(out))
	}
	wait := strconv.Itoa(int(nodeStartTimeout.Seconds()))
	if err := rabbitctlWithin(nodeStartTimeout+rabbitctlTimeout, r.node, "wait", r.pidFile(), "--timeout", wait); err != nil {
		return fmt.Errorf("wait for node: %w", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := amqp.Dial(r.URL())
		if err == nil {
			return conn.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("connect to %s: %w", r.URL(), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (r *Rabbit) kill() error {
	pid, err := r.pid()
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal %d: %w", pid, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for processAlive(pid) {
		if time.Now().After(deadline) {
			return fmt.Errorf("process %d still alive after SIGKILL", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return os.Remove(r.pidFile())
}

func (r *Rabbit) cleanup() {
	if pid, err := r.pid(); err == nil && processAlive(pid) {
		if err := rabbitctl(r.node, "stop", r.pidFile()); err != nil {
			r.t.Logf("testenv: stop private rabbit %s: %v", r.node, err)
			if err := r.kill(); err != nil {
				r.t.Logf("testenv: kill private rabbit %s: %v", r.node, err)
			}
		}
	}
	if err := os.RemoveAll(r.dir); err != nil {
		r.t.Logf("testenv: remove %s: %v", r.dir, err)
	}
}

func (r *Rabbit) pidFile() string {
	return filepath.Join(r.dir, "rabbit.pid")
}

func (r *Rabbit) pid() (int, error) {
	b, err := os.ReadFile(r.pidFile())
	if err != nil {
		return 0, fmt.Errorf("read pid file: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("parse pid file %s: %w", r.pidFile(), err)
	}
	return pid, nil
}

// logTail returns the end of the node's log, to explain a failed start.
func (r *Rabbit) logTail() string {
	b, err := os.ReadFile(filepath.Join(r.dir, "log", r.node+".log"))
	if err != nil {
		return "(no node log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return "node log (last lines):\n" + strings.Join(lines, "\n")
}

// rabbitctl runs rabbitmqctl against node (the machine's default node when
// empty).
func rabbitctl(node string, args ...string) error {
	return rabbitctlWithin(rabbitctlTimeout, node, args...)
}

// rabbitctlWithin is rabbitctl with its own bound on the call.
func rabbitctlWithin(timeout time.Duration, node string, args ...string) error {
	if node == "" && containersUp != nil {
		return containerRabbitctl(args...)
	}
	if _, err := exec.LookPath("rabbitmqctl"); err != nil {
		return fmt.Errorf("rabbitmqctl not found (install rabbitmq-server): %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	full := []string{"-q"}
	if node != "" {
		full = append(full, "-n", node)
	}
	full = append(full, args...)
	out, err := exec.CommandContext(ctx, "rabbitmqctl", full...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("rabbitmqctl %s: %w: %s", strings.Join(full, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// Chown gives dir and everything in it to the named user, as a server
// that runs as that user (RabbitMQ's Debian wrapper, PostgreSQL's initdb)
// needs; it does nothing when the process already runs as that user.
func Chown(dir, name string) error {
	u, err := user.Lookup(name)
	if err != nil {
		return fmt.Errorf("look up user %s: %w", name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if os.Getuid() == uid {
		return nil
	}
	return filepath.Walk(dir, func(path string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(path, uid, gid); err != nil {
			return fmt.Errorf("chown to %s (run as root or %s): %w", name, name, err)
		}
		return nil
	})
}

// freePort returns a TCP port free on the loopback interface and not handed
// out before (freshAddr), outside the ranges RabbitMQ's own tools use (25672
// and 35672-35682 for CLI distribution).
func freePort() (int, error) {
	a, err := freshAddr(func(port int) bool {
		return port != 25672 && port != 4369 && (port < 35672 || port > 35682)
	})
	if err != nil {
		return 0, err
	}
	return a.Port, nil
}

// processAlive reports whether pid names a running (not zombie) process.
func processAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	// The state follows the parenthesised command name.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

func nodeOrDefault(node string) string {
	if node == "" {
		return "default"
	}
	return node
}

// redactURL prints an AMQP URI without its password.
func redactURL(uri amqp.URI) string {
	uri.Password = "xxx"
	return uri.String()
}
