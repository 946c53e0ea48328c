package localstack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// MinIO's credentials in the private sets.
const (
	MinioUser     = "minioadmin"
	MinioPassword = "minioadmin"
)

// MinioSet is a private distributed MinIO: processes on their own ports,
// one drive each, forming one erasure-coded set (4 drives: 2 data and 2
// parity shards per object; writes need 3 drives, reads 2), behind a
// Forwarder that spreads connections over the processes that accept them,
// as a load balancer in front of a MinIO deployment does. Its methods are
// safe for concurrent use.
type MinioSet struct {
	bin string
	dir string
	lb  *Forwarder

	mu    sync.Mutex
	nodes []*minioNode
}

type minioNode struct {
	addr  string
	drive string
	proc  *daemon
}

// StartMinioSet starts n MinIO processes of the binary bin as one
// distributed set and waits until the set accepts writes. Close stops them
// and removes their drives; when StartMinioSet fails, it has done so
// already.
func StartMinioSet(ctx context.Context, bin string, n int) (*MinioSet, error) {
	if n < 4 {
		return nil, fmt.Errorf("a distributed MinIO of %d drives: want at least 4", n)
	}
	dir, err := os.MkdirTemp("/tmp", "dubflow-minio-")
	if err != nil {
		return nil, fmt.Errorf("create minio folder: %w", err)
	}
	s := &MinioSet{bin: bin, dir: dir}
	if err := s.start(ctx, n); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	return s, nil
}

func (s *MinioSet) start(ctx context.Context, n int) error {
	var upstreams []string
	for i := range n {
		addr, err := FreeAddr()
		if err != nil {
			return err
		}
		drive := filepath.Join(s.dir, "drive"+strconv.Itoa(i+1))
		if err := os.Mkdir(drive, 0o755); err != nil {
			return err
		}
		s.nodes = append(s.nodes, &minioNode{addr: addr, drive: drive})
		upstreams = append(upstreams, addr)
	}
	lb, err := Forward(upstreams...)
	if err != nil {
		return err
	}
	s.lb = lb
	for i := range s.nodes {
		if err := s.Start(i); err != nil {
			return err
		}
	}
	return s.WaitWritable(ctx, NodeStartTimeout)
}

// Endpoint is the set's address for S3 clients (host:port, plain HTTP):
// the forwarder in front of every process.
func (s *MinioSet) Endpoint() string { return s.lb.Addr() }

// Addr is process i's own address.
func (s *MinioSet) Addr(i int) string { return s.nodes[i].addr }

// Nodes is how many processes the set has.
func (s *MinioSet) Nodes() int { return len(s.nodes) }

// Start starts process i (after Kill or Stop) on its drive; it rejoins the
// set, and MinIO heals what was written without it.
func (s *MinioSet) Start(i int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.nodes[i]
	if n.proc.alive() {
		return fmt.Errorf("minio %d runs already", i+1)
	}
	args := []string{"server", "--quiet", "--address", n.addr}
	for _, m := range s.nodes {
		args = append(args, "http://"+m.addr+m.drive)
	}
	cmd := exec.Command(s.bin, args...)
	cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+MinioUser, "MINIO_ROOT_PASSWORD="+MinioPassword,
		"MINIO_BROWSER=off",
		// The drives share the machine's root file system, which a
		// production MinIO refuses; MINIO_CI_CD lets a test set use it.
		"MINIO_CI_CD=1",
		// In a container MinIO waits for an address that is not the
		// loopback's; this names the process's own endpoint.
		"_MINIO_SERVER_LOCAL="+n.addr)
	d, err := startDaemon(cmd, filepath.Join(s.dir, "minio"+strconv.Itoa(i+1)+".log"), "")
	if err != nil {
		return err
	}
	n.proc = d
	return nil
}

// Kill ends process i with SIGKILL, as a crash or a lost machine would.
func (s *MinioSet) Kill(i int) {
	s.mu.Lock()
	p := s.nodes[i].proc
	s.mu.Unlock()
	p.signal(syscall.SIGKILL, 10*time.Second)
}

// Stop ends process i with SIGTERM.
func (s *MinioSet) Stop(i int) {
	s.mu.Lock()
	p := s.nodes[i].proc
	s.mu.Unlock()
	p.signal(syscall.SIGTERM, 20*time.Second)
}

// Live reports whether process i answers its liveness check.
func (s *MinioSet) Live(i int) bool {
	return httpStatus("http://"+s.nodes[i].addr+"/minio/health/live") == 200
}

// WaitWritable waits until every running process says the set has write
// quorum (MinIO's cluster health check answers 200), so that whichever the
// forwarder picks serves.
func (s *MinioSet) WaitWritable(ctx context.Context, within time.Duration) error {
	err := WaitFor(ctx, within, "minio set writable", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, n := range s.nodes {
			if n.proc.alive() && httpStatus("http://"+n.addr+"/minio/health/cluster") != 200 {
				return false
			}
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("%w (logs in %s)", err, s.dir)
	}
	return nil
}

// WaitLive waits until process i answers its liveness check.
func (s *MinioSet) WaitLive(ctx context.Context, i int, within time.Duration) error {
	return WaitFor(ctx, within, fmt.Sprintf("minio %d live", i+1), func() bool { return s.Live(i) })
}

// Dir is the set's folder (drives and logs).
func (s *MinioSet) Dir() string { return s.dir }

// Close stops every process and the forwarder and removes the drives.
func (s *MinioSet) Close() error {
	for _, n := range s.nodes {
		n.proc.signal(syscall.SIGTERM, 20*time.Second)
	}
	var errs []error
	if s.lb != nil {
		errs = append(errs, s.lb.Close())
	}
	if err := os.RemoveAll(s.dir); err != nil {
		errs = append(errs, fmt.Errorf("remove %s: %w", s.dir, err))
	}
	return errors.Join(errs...)
}
