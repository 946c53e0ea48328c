package stack

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

// Cleanups runs what the run started, last first, once.
type Cleanups struct {
	mu  sync.Mutex
	fns []func()
}

func (c *Cleanups) Add(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fns = append(c.fns, f)
}

func (c *Cleanups) Run() {
	c.mu.Lock()
	fns := c.fns
	c.fns = nil
	c.mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}

// ---------------------------------------------------------------- RabbitMQ

// Rabbit is the private RabbitMQ: one node, or the nodes of a private
// cluster (-cluster).
type Rabbit struct {
	mu    sync.Mutex
	Nodes []*localstack.Rabbit
}

// StartRabbit starts one private node, or a cluster of nodes when nodes
// is more than one; the run's cleanups stop them.
func StartRabbit(cl *Cleanups, logf func(string, ...any), nodes int) (*Rabbit, error) {
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
		cl.Add(closer(r.Close))
		return &Rabbit{Nodes: []*localstack.Rabbit{r}}, nil
	}
	c, err := localstack.StartCluster(nodes)
	if err != nil {
		return nil, fmt.Errorf("private rabbitmq cluster: %w", err)
	}
	cl.Add(closer(c.Close))
	return &Rabbit{Nodes: c.Nodes()}, nil
}

// Url is the AMQP_URL of every node, separated by commas.
func (b *Rabbit) URL() string {
	urls := make([]string, len(b.Nodes))
	for i, r := range b.Nodes {
		urls[i] = r.URL()
	}
	return strings.Join(urls, ",")
}

// Addr is the host:port of node i.
func (b *Rabbit) Addr(i int) string {
	return b.Nodes[i].Addr()
}

// BootWait bounds the wait for a backing server (RabbitMQ, Postgres,
// MinIO) to accept connections after a start: on a loaded machine (a load
// of 60 on two cores) a boot took more than 90 s.
const BootWait = 5 * time.Minute

// Restart stops node i cleanly, or kills it when crash is set, and starts
// it again on the same data (a cluster node rejoins its cluster). A node
// still booting when rabbitmqctl gives up was started (detached) all the
// same: it is waited for, so that a slow boot is not counted as a fault
// that could not be injected.
func (b *Rabbit) Restart(i int, crash bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.Nodes[i]
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
	ctx, cancel := context.WithTimeout(context.Background(), BootWait)
	defer cancel()
	for ctx.Err() == nil {
		if conn, derr := net.DialTimeout("tcp", b.Addr(i), time.Second); derr == nil {
			conn.Close()
			return nil
		}
		SleepCtx(ctx, time.Second)
	}
	return fmt.Errorf("%w; not accepting connections %s later", err, BootWait)
}

// ---------------------------------------------------------------- Postgres

// Postgres is a private server on a folder the postgres user owns.
type Postgres struct {
	mu   sync.Mutex
	bin  string
	dir  string
	data string
	Port int
}

func StartPostgres(ctx context.Context, work string, cl *Cleanups) (*Postgres, error) {
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(bins) == 0 {
		return nil, errors.New("postgres: no /usr/lib/postgresql/*/bin/pg_ctl (install the Debian package postgresql)")
	}
	port, err := localstack.FreePort()
	if err != nil {
		return nil, err
	}
	p := &Postgres{bin: filepath.Dir(bins[len(bins)-1]), dir: filepath.Join(work, "postgres"), Port: port}
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
	cl.Add(func() {
		_, _ = p.ctl(context.Background(), "pg_ctl", "-D", p.data, "-m", "immediate", "-w", "-t", "60", "stop")
	})
	if err := p.start(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *Postgres) URL(port int) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/dubflow?sslmode=disable", port)
}

func (p *Postgres) start(ctx context.Context) error {
	out, err := p.ctl(ctx, "pg_ctl", "-D", p.data, "-l", filepath.Join(p.dir, "postgres.log"), "-w", "-t", strconv.Itoa(int(BootWait/time.Second)), "start")
	if err != nil {
		return fmt.Errorf("postgres: start: %w\n%s", err, out)
	}
	return nil
}

// Crash stops the server the way a power cut would (immediate: no
// checkpoint, crash recovery at the next start) and starts it again after
// down.
func (p *Postgres) Crash(ctx context.Context, down time.Duration) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if out, err := p.ctl(context.WithoutCancel(ctx), "pg_ctl", "-D", p.data, "-m", "immediate", "-w", "-t", "60", "stop"); err != nil {
		return fmt.Errorf("postgres: immediate stop: %w\n%s", err, out)
	}
	SleepCtx(ctx, down)
	return p.start(context.WithoutCancel(ctx))
}

// ctl runs one of the server's programs as the postgres user.
func (p *Postgres) ctl(ctx context.Context, prog string, args ...string) ([]byte, error) {
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

// MinioServer is a private MinIO.
type MinioServer struct {
	mu   sync.Mutex
	bin  string
	dir  string
	log  string
	Port int
	proc *exec.Cmd
	done chan struct{}
}

const (
	S3AccessKey = "minioadmin"
	S3SecretKey = "minioadmin"
	S3Bucket    = "dubflow"
)

func StartMinio(ctx context.Context, bin, work string, cl *Cleanups) (*MinioServer, error) {
	port, err := localstack.FreePort()
	if err != nil {
		return nil, err
	}
	m := &MinioServer{bin: bin, dir: filepath.Join(work, "minio"), log: filepath.Join(work, "logs", "minio.log"), Port: port}
	if err := os.MkdirAll(m.dir, 0o755); err != nil {
		return nil, err
	}
	cl.Add(func() { m.stop(syscall.SIGTERM) })
	return m, m.start(ctx)
}

func (m *MinioServer) start(ctx context.Context) error {
	cmd := exec.Command(m.bin, "server", "--quiet", "--address", fmt.Sprintf("127.0.0.1:%d", m.Port), m.dir)
	cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+S3AccessKey, "MINIO_ROOT_PASSWORD="+S3SecretKey, "MINIO_BROWSER=off")
	done, err := StartLogged(cmd, m.log, "")
	if err != nil {
		return fmt.Errorf("minio: %w", err)
	}
	m.proc, m.done = cmd, done
	url := fmt.Sprintf("http://127.0.0.1:%d/minio/health/live", m.Port)
	return WaitUntil(ctx, BootWait, "minio live", func() bool {
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
func (m *MinioServer) stop(sig syscall.Signal) {
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

// Restart stops the server (SIGKILL when crash is set) and starts it
// again after down.
func (m *MinioServer) Restart(ctx context.Context, crash bool, down time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	sig := syscall.SIGTERM
	if crash {
		sig = syscall.SIGKILL
	}
	m.stop(sig)
	SleepCtx(ctx, down)
	return m.start(context.WithoutCancel(ctx))
}

// ---------------------------------------------------------------- helpers

// StartLogged starts cmd in its own process group, its output appended to
// the file at log after the line header (when not empty); done is closed
// when the process has exited.
func StartLogged(cmd *exec.Cmd, log, header string) (done chan struct{}, err error) {
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

// WaitUntil polls cond until it holds, ctx ends or within passes
// (localstack.WaitFor).
func WaitUntil(ctx context.Context, within time.Duration, what string, cond func() bool) error {
	return localstack.WaitFor(ctx, within, what, cond)
}

// SleepCtx pauses for d or until ctx ends.
func SleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// HostPort is "127.0.0.1:port".
func HostPort(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// PortOf returns the port of a "host:port" address.
func portOf(addr string) int {
	i := strings.LastIndexByte(addr, ':')
	p, _ := strconv.Atoi(addr[i+1:])
	return p
}
