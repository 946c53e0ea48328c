package localstack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"
)

// RabbitctlTimeout bounds one rabbitmqctl call; the CLI starts an Erlang VM
// each time, which takes about a second on a quiet machine and tens of
// seconds on a loaded one (make test beside stress-ng and other builds).
const RabbitctlTimeout = 2 * time.Minute

// NodeStartTimeout bounds how long a private node may take to boot. It only
// stops a caller from hanging on a node that never comes up: a node booting
// on a machine with a load average of 100 was seen to need more than 60 s.
const NodeStartTimeout = 5 * time.Minute

// Rabbit is a private RabbitMQ node, for callers that stop, restart or kill
// the broker without disturbing anyone else. Its methods are not safe for
// concurrent use.
type Rabbit struct {
	node     string
	port     int
	distPort int
	dir      string
	// ns, when not empty, is the network namespace the node runs in (a
	// NetCluster's), host its address there; "" and 127.0.0.1 otherwise.
	ns   string
	host string
}

// StartRabbit starts a private rabbitmq-server with its own node name, its
// own AMQP and distribution ports, and its data in a fresh folder owned by
// the rabbitmq user. It takes about five seconds. Close stops the node and
// removes its data; when StartRabbit fails, it has done so already.
func StartRabbit() (*Rabbit, error) {
	if _, err := exec.LookPath("rabbitmq-server"); err != nil {
		return nil, fmt.Errorf("rabbitmq-server not found (install the Debian package rabbitmq-server, or run scripts/stack.sh up --infra-only): %w", err)
	}
	dir, err := os.MkdirTemp("/tmp", "dubflow-rabbit-")
	if err != nil {
		return nil, fmt.Errorf("create rabbit data folder: %w", err)
	}
	r := &Rabbit{dir: dir, node: "dubflow-test-" + strings.ReplaceAll(uuid.NewString()[:13], "-", "") + "@localhost", host: "127.0.0.1"}
	if err := r.prepare(); err != nil {
		err = fmt.Errorf("prepare private rabbit in %s: %w", dir, err)
		return nil, errors.Join(err, r.Close())
	}
	if err := r.Start(); err != nil {
		return nil, errors.Join(err, r.Close())
	}
	return r, nil
}

// URL returns the AMQP URL of the private node's default virtual host.
func (r *Rabbit) URL() string {
	return fmt.Sprintf("amqp://guest:guest@%s:%d/", r.host, r.port)
}

// Addr returns the node's AMQP address, host:port.
func (r *Rabbit) Addr() string {
	return r.host + ":" + strconv.Itoa(r.port)
}

// Node returns the node name, for rabbitmqctl -n.
func (r *Rabbit) Node() string {
	return r.node
}

// Start starts the node and waits until it accepts AMQP connections.
func (r *Rabbit) Start() error {
	if err := r.start(); err != nil {
		return fmt.Errorf("start private rabbit %s: %w\n%s", r.node, err, r.logTail())
	}
	return nil
}

// Stop stops the node cleanly and waits until its process has exited.
func (r *Rabbit) Stop() error {
	if err := Rabbitctl(r.node, "stop", r.pidFile()); err != nil {
		return fmt.Errorf("stop private rabbit %s: %w", r.node, err)
	}
	return nil
}

// Kill ends the node with SIGKILL, as a crash would, and waits until its
// process is gone.
func (r *Rabbit) Kill() error {
	if err := r.kill(); err != nil {
		return fmt.Errorf("kill private rabbit %s: %w", r.node, err)
	}
	return nil
}

// Restart stops the node cleanly and starts it again on the same ports and
// data, so durable queues and messages survive.
func (r *Rabbit) Restart() error {
	if err := r.Stop(); err != nil {
		return err
	}
	return r.Start()
}

// Close stops the node when it runs (killing it when it does not stop) and
// removes its data; it returns what went wrong on the way.
func (r *Rabbit) Close() error {
	var errs []error
	if pid, err := r.pid(); err == nil && ProcessAlive(pid) {
		if err := r.Stop(); err != nil {
			errs = append(errs, err)
			if err := r.Kill(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := os.RemoveAll(r.dir); err != nil {
		errs = append(errs, fmt.Errorf("remove %s: %w", r.dir, err))
	}
	return errors.Join(errs...)
}

func (r *Rabbit) prepare() (err error) {
	if r.ns == "" {
		if r.port, err = rabbitPort(); err != nil {
			return err
		}
		if r.distPort, err = rabbitPort(); err != nil {
			return err
		}
	}
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
	if r.ns != "" {
		// A namespace of its own: the node listens on its address, lets
		// guest in from the other namespaces, and pauses while it is in
		// the minority of a partition (RabbitMQ's advice for 3 nodes).
		files["rabbitmq.conf"] = fmt.Sprintf("listeners.tcp.default = %d\nloopback_users = none\ncluster_partition_handling = pause_minority\n", r.port)
		files["rabbitmq-env.conf"] = ""
		// A peer gone silent is noticed after 7.5–12.5 s instead of the
		// default 45–75 s: until then the cluster's metadata changes
		// (a client's bindings declared again) wait for it.
		files["advanced.config"] = "[{kernel, [{net_ticktime, 10}]}].\n"
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
	ctx, cancel := context.WithTimeout(context.Background(), RabbitctlTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "rabbitmq-server", "-detached")
	if r.ns != "" {
		cmd = exec.CommandContext(ctx, "ip", "netns", "exec", r.ns, "rabbitmq-server", "-detached")
	}
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(),
		"RABBITMQ_USE_LONGNAME="+strconv.FormatBool(longName(r.node)),
		"RABBITMQ_NODENAME="+r.node,
		"RABBITMQ_DIST_PORT="+strconv.Itoa(r.distPort),
		"RABBITMQ_CONFIG_FILE="+filepath.Join(r.dir, "rabbitmq.conf"),
		"RABBITMQ_CONF_ENV_FILE="+filepath.Join(r.dir, "rabbitmq-env.conf"),
		"RABBITMQ_MNESIA_BASE="+filepath.Join(r.dir, "mnesia"),
		"RABBITMQ_LOG_BASE="+filepath.Join(r.dir, "log"),
		"RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(r.dir, "enabled_plugins"),
		"RABBITMQ_PID_FILE="+r.pidFile(),
	)
	if r.ns != "" {
		cmd.Env = append(cmd.Env, "RABBITMQ_ADVANCED_CONFIG_FILE="+filepath.Join(r.dir, "advanced.config"))
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("rabbitmq-server -detached: %w: %s", err, bytes.TrimSpace(out))
	}
	wait := strconv.Itoa(int(NodeStartTimeout.Seconds()))
	if err := RabbitctlWithin(NodeStartTimeout+RabbitctlTimeout, r.node, "wait", r.pidFile(), "--timeout", wait); err != nil {
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
	for ProcessAlive(pid) {
		if time.Now().After(deadline) {
			return fmt.Errorf("process %d still alive after SIGKILL", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return os.Remove(r.pidFile())
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

// Rabbitctl runs rabbitmqctl against node (the machine's default node when
// empty), within RabbitctlTimeout.
func Rabbitctl(node string, args ...string) error {
	return RabbitctlWithin(RabbitctlTimeout, node, args...)
}

// RabbitctlWithin is Rabbitctl with its own bound on the call.
func RabbitctlWithin(timeout time.Duration, node string, args ...string) error {
	if _, err := exec.LookPath("rabbitmqctl"); err != nil {
		return fmt.Errorf("rabbitmqctl not found (install rabbitmq-server): %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	full := []string{"-q"}
	if longName(node) {
		full = append(full, "-l")
	}
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

// longName reports whether node is a long Erlang node name (its host part
// an address or a qualified name), which rabbitmqctl must be told of (-l).
func longName(node string) bool {
	_, host, _ := strings.Cut(node, "@")
	return strings.Contains(host, ".")
}
