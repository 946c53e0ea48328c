package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dubflow/dubflow/pkg/localstack"
)

// cleanups runs what the run started, last first, once.
type cleanups struct {
	mu  sync.Mutex
	fns []func()
}

func (c *cleanups) add(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fns = append(c.fns, f)
}

func (c *cleanups) run() {
	c.mu.Lock()
	fns := c.fns
	c.fns = nil
	c.mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}

// ---------------------------------------------------------------- RabbitMQ

// rabbit is the private RabbitMQ: one node, or the nodes of a private
// cluster (-cluster).
type rabbit struct {
	mu    sync.Mutex
	nodes []*localstack.Rabbit
}

// startRabbit starts one private node, or a cluster of nodes when nodes
// is more than one; the run's cleanups stop them.
func startRabbit(cl *cleanups, logf func(string, ...any), nodes int) (*rabbit, error) {
	closer := func(close func() error) func() {
		return func() {
			if err := close(); err != nil {
				logf("private rabbitmq: %v", err)
			}
		}
	}
	if nodes == 1 {
		r, err := localstack.StartRabbit()
		if err != nil {
			return nil, fmt.Errorf("private rabbitmq: %w", err)
		}
		cl.add(closer(r.Close))
		return &rabbit{nodes: []*localstack.Rabbit{r}}, nil
	}
	c, err := localstack.StartCluster(nodes)
	if err != nil {
		return nil, fmt.Errorf("private rabbitmq cluster: %w", err)
	}
	cl.add(closer(c.Close))
	return &rabbit{nodes: c.Nodes()}, nil
}

// url is the AMQP_URL of every node, separated by commas.
func (b *rabbit) url() string {
	urls := make([]string, len(b.nodes))
	for i, r := range b.nodes {
		urls[i] = r.URL()
	}
	return strings.Join(urls, ",")
}

// addr is the host:port of node i.
func (b *rabbit) addr(i int) string {
	return b.nodes[i].Addr()
}

// bootWait bounds the wait for a backing server (RabbitMQ, Postgres,
// MinIO) to accept connections after a start: on a loaded machine (a load
// of 60 on two cores) a boot took more than 90 s.
const bootWait = 5 * time.Minute

// restart stops node i cleanly, or kills it when crash is set, and starts
// it again on the same data (a cluster node rejoins its cluster). A node
// still booting when rabbitmqctl gives up was started (detached) all the
// same: it is waited for, so that a slow boot is not counted as a fault
// that could not be injected.
func (b *rabbit) restart(i int, crash bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.nodes[i]
	stop := r.Stop
	if crash {
		stop = r.Kill
	}
	if err := stop(); err != nil {
		return err
	}
	err := r.Start()
	if err == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), bootWait)
	defer cancel()
	for ctx.Err() == nil {
		if conn, derr := net.DialTimeout("tcp", b.addr(i), time.Second); derr == nil {
			conn.Close()
			return nil
		}
		sleepCtx(ctx, time.Second)
	}
	return fmt.Errorf("%w; not accepting connections %s later", err, bootWait)
}

// ---------------------------------------------------------------- Postgres

// postgres is a private server on a folder the postgres user owns.
type postgres struct {
	mu   sync.Mutex
	bin  string
	dir  string
	data string
	port int
}

func startPostgres(ctx context.Context, work string, cl *cleanups) (*postgres, error) {
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(bins) == 0 {
		return nil, errors.New("postgres: no /usr/lib/postgresql/*/bin/pg_ctl (install the Debian package postgresql)")
	}
	port, err := localstack.FreePort()
	if err != nil {
		return nil, err
	}
	p := &postgres{bin: filepath.Dir(bins[len(bins)-1]), dir: filepath.Join(work, "postgres"), port: port}
	p.data = filepath.Join(p.dir, "data")
	if err := os.Mkdir(p.dir, 0o755); err != nil {
		return nil, err
	}
	if os.Getuid() == 0 { // ctl runs initdb as postgres, which refuses to run as root
		if err := localstack.Chown(p.dir, "postgres"); err != nil {
			return nil, err
		}
	}
	if out, err := p.ctl(ctx, "initdb", "-D", p.data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-locale"); err != nil {
		return nil, fmt.Errorf("postgres: initdb: %w\n%s", err, out)
	}
	conf := "listen_addresses = '127.0.0.1'\nport = " + strconv.Itoa(port) + "\nunix_socket_directories = ''\nmax_connections = 300\nfsync = on\n"
	f, err := os.OpenFile(filepath.Join(p.data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	_, err = f.WriteString(conf)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	cl.add(func() {
		_, _ = p.ctl(context.Background(), "pg_ctl", "-D", p.data, "-m", "immediate", "-w", "-t", "60", "stop")
	})
	if err := p.start(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *postgres) url(port int) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/dubflow?sslmode=disable", port)
}

func (p *postgres) start(ctx context.Context) error {
	out, err := p.ctl(ctx, "pg_ctl", "-D", p.data, "-l", filepath.Join(p.dir, "postgres.log"), "-w", "-t", strconv.Itoa(int(bootWait/time.Second)), "start")
	if err != nil {
		return fmt.Errorf("postgres: start: %w\n%s", err, out)
	}
	return nil
}

// crash stops the server the way a power cut would (immediate: no
// checkpoint, crash recovery at the next start) and starts it again after
// down.
func (p *postgres) crash(ctx context.Context, down time.Duration) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if out, err := p.ctl(context.WithoutCancel(ctx), "pg_ctl", "-D", p.data, "-m", "immediate", "-w", "-t", "60", "stop"); err != nil {
		return fmt.Errorf("postgres: immediate stop: %w\n%s", err, out)
	}
	sleepCtx(ctx, down)
	return p.start(context.WithoutCancel(ctx))
}

// ctl runs one of the server's programs as the postgres user.
func (p *postgres) ctl(ctx context.Context, prog string, args ...string) ([]byte, error) {
	path := filepath.Join(p.bin, prog)
	var cmd *exec.Cmd
	if os.Getuid() == 0 {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
	}
	cmd.Dir = p.dir
	// Its own process group: a Ctrl-C at the terminal must not reach the
	// server before the run's cleanup stops it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd.CombinedOutput()
}

// ---------------------------------------------------------------- MinIO

// minioServer is a private MinIO.
type minioServer struct {
	mu   sync.Mutex
	bin  string
	dir  string
	log  string
	port int
	proc *exec.Cmd
	done chan struct{}
}

const (
	s3AccessKey = "minioadmin"
	s3SecretKey = "minioadmin"
	s3Bucket    = "dubflow"
)

func startMinio(ctx context.Context, bin, work string, cl *cleanups) (*minioServer, error) {
	port, err := localstack.FreePort()
	if err != nil {
		return nil, err
	}
	m := &minioServer{bin: bin, dir: filepath.Join(work, "minio"), log: filepath.Join(work, "logs", "minio.log"), port: port}
	if err := os.MkdirAll(m.dir, 0o755); err != nil {
		return nil, err
	}
	cl.add(func() { m.stop(syscall.SIGTERM) })
	return m, m.start(ctx)
}

func (m *minioServer) start(ctx context.Context) error {
	cmd := exec.Command(m.bin, "server", "--quiet", "--address", fmt.Sprintf("127.0.0.1:%d", m.port), m.dir)
	cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+s3AccessKey, "MINIO_ROOT_PASSWORD="+s3SecretKey, "MINIO_BROWSER=off")
	done, err := startLogged(cmd, m.log, "")
	if err != nil {
		return fmt.Errorf("minio: %w", err)
	}
	m.proc, m.done = cmd, done
	url := fmt.Sprintf("http://127.0.0.1:%d/minio/health/live", m.port)
	return waitUntil(ctx, bootWait, "minio live", func() bool {
		select {
		case <-done:
			return false
		default:
		}
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// stop ends the server with sig and waits until it has exited.
func (m *minioServer) stop(sig syscall.Signal) {
	if m.proc == nil {
		return
	}
	_ = m.proc.Process.Signal(sig)
	select {
	case <-m.done:
	case <-time.After(20 * time.Second):
		_ = m.proc.Process.Kill()
		<-m.done
	}
}

// restart stops the server (SIGKILL when crash is set) and starts it
// again after down.
func (m *minioServer) restart(ctx context.Context, crash bool, down time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	sig := syscall.SIGTERM
	if crash {
		sig = syscall.SIGKILL
	}
	m.stop(sig)
	sleepCtx(ctx, down)
	return m.start(context.WithoutCancel(ctx))
}

// ---------------------------------------------------------------- helpers

// startLogged starts cmd in its own process group, its output appended to
// the file at log after the line header (when not empty); done is closed
// when the process has exited.
func startLogged(cmd *exec.Cmd, log, header string) (done chan struct{}, err error) {
	f, err := os.OpenFile(log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	if header != "" {
		fmt.Fprintln(f, header)
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	done = make(chan struct{})
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(done)
	}()
	return done, nil
}

// waitUntil polls cond every 200 ms until it holds, ctx ends or within
// passes.
func waitUntil(ctx context.Context, within time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %s", what, within)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

// sleepCtx pauses for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// hostPort is "127.0.0.1:port".
func hostPort(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// portOf returns the port of a "host:port" address.
func portOf(addr string) int {
	i := strings.LastIndexByte(addr, ':')
	p, _ := strconv.Atoi(addr[i+1:])
	return p
}
