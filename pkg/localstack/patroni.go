package localstack

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
)

// PGOptions shape a PGCluster.
type PGOptions struct {
	// Nodes is how many PostgreSQL servers the cluster has (2 when 0): a
	// primary and standbys.
	Nodes int
	// Synchronous makes Patroni keep a synchronous standby (synchronous_mode):
	// a commit returns once the standby has it, and only that standby is
	// promoted, so no acknowledged commit is lost in a failover. Otherwise
	// replication is asynchronous and a failover may lose the last commits.
	Synchronous bool
	// MaxConnections is each server's max_connections (300 when 0).
	MaxConnections int
}

// Patroni's timing in the private clusters: the leader key lives TTL
// seconds, each member looks every LoopWait; a lost primary is replaced
// about TTL + LoopWait after it went (Patroni wants LoopWait + 2 ×
// RetryTimeout ≤ TTL).
const (
	patroniTTL          = 10
	patroniLoopWait     = 1
	patroniRetryTimeout = 4
)

// PGCluster is a private PostgreSQL cluster managed by Patroni (Debian's
// patroni, with a private single-member etcd as its store): a primary and
// standbys on their own ports and data, each server's replication link
// through a Forwarder the caller can cut (CutReplication). Its methods are
// safe for concurrent use.
type PGCluster struct {
	dir   string
	scope string
	opts  PGOptions
	etcd  *daemon
	etcdC string // etcd's client address

	mu    sync.Mutex
	nodes []*pgNode
}

// pgNode is one member: its Patroni (which starts and stops its
// PostgreSQL), and the forwarder its standbys replicate through.
type pgNode struct {
	name    string
	dir     string
	port    int // PostgreSQL's
	rest    int // Patroni's REST API
	link    *Forwarder
	patroni *daemon
}

// StartPGCluster starts etcd and a Patroni per node, waits until the first
// node is the primary and every other streams from it (a synchronous
// standby among them when opts.Synchronous), and returns the cluster. It
// needs Debian's patroni, etcd-server and PostgreSQL's server binaries, and
// root or the postgres user. Close stops everything and removes the data;
// when StartPGCluster fails, it has done so already.
func StartPGCluster(ctx context.Context, opts PGOptions) (*PGCluster, error) {
	if opts.Nodes == 0 {
		opts.Nodes = 2
	}
	if opts.MaxConnections == 0 {
		opts.MaxConnections = 300
	}
	for _, prog := range []string{"patroni", "etcd"} {
		if _, err := exec.LookPath(prog); err != nil {
			return nil, fmt.Errorf("%s not found (install the Debian packages patroni and etcd-server): %w", prog, err)
		}
	}
	dir, err := os.MkdirTemp("/tmp", "dubflow-pg-")
	if err != nil {
		return nil, fmt.Errorf("create cluster folder: %w", err)
	}
	c := &PGCluster{dir: dir, opts: opts, scope: "dubflow-" + uuid.NewString()[:8]}
	if err := c.start(ctx); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return c, nil
}

func (c *PGCluster) start(ctx context.Context) error {
	if err := os.Chmod(c.dir, 0o755); err != nil {
		return err
	}
	if err := c.startEtcd(ctx); err != nil {
		return err
	}
	for i := range c.opts.Nodes {
		n, err := c.prepareNode(i)
		if err != nil {
			return err
		}
		c.nodes = append(c.nodes, n)
	}
	// The first node bootstraps the cluster; the others copy it
	// (pg_basebackup) once it is the primary.
	if err := c.startNode(0); err != nil {
		return err
	}
	if _, err := c.WaitPrimary(ctx, -1, NodeStartTimeout); err != nil {
		return err
	}
	for i := 1; i < len(c.nodes); i++ {
		if err := c.startNode(i); err != nil {
			return err
		}
	}
	return c.WaitReplicated(ctx, NodeStartTimeout)
}

// startEtcd starts the private etcd and waits until it is healthy.
func (c *PGCluster) startEtcd(ctx context.Context) error {
	client, err := FreeAddr()
	if err != nil {
		return err
	}
	peer, err := FreeAddr()
	if err != nil {
		return err
	}
	c.etcdC = client
	cmd := exec.Command("etcd", "--name", "etcd", "--data-dir", filepath.Join(c.dir, "etcd"),
		"--listen-client-urls", "http://"+client, "--advertise-client-urls", "http://"+client,
		"--listen-peer-urls", "http://"+peer, "--initial-advertise-peer-urls", "http://"+peer,
		"--initial-cluster", "etcd=http://"+peer, "--log-level", "warn", "--logger", "zap")
	if c.etcd, err = startDaemon(cmd, filepath.Join(c.dir, "etcd.log"), ""); err != nil {
		return err
	}
	return WaitFor(ctx, time.Minute, "etcd healthy", func() bool {
		return c.etcd.alive() && httpStatus("http://"+client+"/health") == 200
	})
}

// prepareNode makes node i's folder (the postgres user's), its ports, its
// replication forwarder and its Patroni configuration.
func (c *PGCluster) prepareNode(i int) (*pgNode, error) {
	n := &pgNode{name: "pg" + strconv.Itoa(i+1), dir: filepath.Join(c.dir, "pg"+strconv.Itoa(i+1))}
	var err error
	if n.port, err = FreePort(); err != nil {
		return nil, err
	}
	if n.rest, err = FreePort(); err != nil {
		return nil, err
	}
	if n.link, err = Forward(hostPort(n.port)); err != nil {
		return nil, err
	}
	if err := os.Mkdir(n.dir, 0o700); err != nil {
		return nil, err
	}
	conf := patroniConfig(c.scope, c.etcdC, n, c.opts)
	if err := os.WriteFile(filepath.Join(n.dir, "patroni.yml"), []byte(conf), 0o600); err != nil {
		return nil, err
	}
	if os.Getuid() == 0 {
		if err := Chown(n.dir, "postgres"); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// patroniConfig is node n's Patroni configuration. Its connect_address —
// what the other members replicate from and pg_rewind reads — is its
// replication forwarder; clients use the server's own port.
func patroniConfig(scope, etcd string, n *pgNode, o PGOptions) string {
	bin := pgBinDir()
	return fmt.Sprintf(`scope: %[1]s
name: %[2]s
log:
  level: WARNING
restapi:
  listen: 127.0.0.1:%[3]d
  connect_address: 127.0.0.1:%[3]d
etcd3:
  hosts: %[4]s
bootstrap:
  dcs:
    ttl: %[5]d
    loop_wait: %[6]d
    retry_timeout: %[7]d
    maximum_lag_on_failover: 16777216
    synchronous_mode: %[8]t
    postgresql:
      use_pg_rewind: true
      parameters:
        max_connections: %[9]d
        wal_log_hints: 'on'
        max_wal_senders: 10
        max_replication_slots: 10
        wal_keep_size: 256MB
  initdb:
    - encoding: UTF8
    - no-locale
    - auth: trust
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:%[10]d
  connect_address: %[11]s
  data_dir: %[12]s/data
  bin_dir: %[13]s
  pgpass: %[12]s/pgpass
  authentication:
    superuser: {username: postgres}
    replication: {username: postgres}
    rewind: {username: postgres}
  parameters:
    unix_socket_directories: %[12]s
    fsync: 'on'
`, scope, n.name, n.rest, etcd, patroniTTL, patroniLoopWait, patroniRetryTimeout, o.Synchronous,
		o.MaxConnections, n.port, n.link.Addr(), n.dir, bin)
}

// pgBinDir is the newest installed PostgreSQL's server binaries folder.
func pgBinDir() string {
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	if len(bins) == 0 {
		return "/usr/lib/postgresql/15/bin"
	}
	return bins[len(bins)-1]
}

// startNode starts node i's Patroni (as the postgres user when running as
// root), which starts its PostgreSQL: as the primary, as a copy of the
// primary, or rejoining after a loss (pg_rewind when it diverged).
func (c *PGCluster) startNode(i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes[i]
	if n.patroni.alive() {
		return fmt.Errorf("node %s runs already", n.name)
	}
	cmd := exec.Command("patroni", filepath.Join(n.dir, "patroni.yml"))
	cmd.Dir = n.dir
	cmd.Env = append(os.Environ(), "HOME="+n.dir)
	d, err := startDaemon(cmd, filepath.Join(c.dir, n.name+".log"), "postgres")
	if err != nil {
		return fmt.Errorf("node %s: %w", n.name, err)
	}
	n.patroni = d
	return nil
}

// URL is the multi-host URL of database db on the cluster: every server,
// target_session_attrs=read-write, so that a client connects to whichever
// is the primary now.
func (c *PGCluster) URL(db string) string {
	return MultiHostURL(c.Addrs(), db)
}

// MultiHostURL is a postgres:// URL naming every host of addrs, for
// libpq and pgx to connect to the one that accepts writes.
func MultiHostURL(addrs []string, db string) string {
	q := url.Values{"sslmode": {"disable"}, "target_session_attrs": {"read-write"}, "connect_timeout": {"5"}}
	return "postgres://postgres@" + strings.Join(addrs, ",") + "/" + db + "?" + q.Encode()
}

// Addrs are the servers' addresses (host:port), node by node.
func (c *PGCluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = hostPort(n.port)
	}
	return addrs
}

// NodeURL is the URL of database db on node i alone.
func (c *PGCluster) NodeURL(i int, db string) string {
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", hostPort(c.nodes[i].port), db)
}

// Nodes is how many servers the cluster has.
func (c *PGCluster) Nodes() int { return len(c.nodes) }

// role asks node i's Patroni whether it answers path (/primary, /replica,
// /sync) with 200.
func (c *PGCluster) role(i int, path string) bool {
	c.mu.Lock()
	n := c.nodes[i]
	alive := n.patroni.alive()
	c.mu.Unlock()
	return alive && httpStatus(fmt.Sprintf("http://127.0.0.1:%d%s", n.rest, path)) == 200
}

// Primary is the node that is the primary now, -1 when none is.
func (c *PGCluster) Primary() int {
	for i := range c.nodes {
		if c.role(i, "/primary") {
			return i
		}
	}
	return -1
}

// WaitPrimary waits until a node other than not (-1: any) is the primary
// and returns it.
func (c *PGCluster) WaitPrimary(ctx context.Context, not int, within time.Duration) (int, error) {
	p := -1
	err := WaitFor(ctx, within, "a primary", func() bool {
		p = c.Primary()
		return p >= 0 && p != not
	})
	if err != nil {
		return -1, fmt.Errorf("%w (logs in %s)", err, c.dir)
	}
	return p, nil
}

// WaitReplicated waits until every node runs, one of them the primary and
// the others streaming from it, one of them its synchronous standby when
// the cluster is synchronous: the state in which losing the primary is a
// failover, not an outage.
func (c *PGCluster) WaitReplicated(ctx context.Context, within time.Duration) error {
	err := WaitFor(ctx, within, "every standby streaming", func() bool {
		p, sync := c.Primary(), false
		if p < 0 {
			return false
		}
		for i := range c.nodes {
			if i == p {
				continue
			}
			if !c.role(i, "/replica") {
				return false
			}
			sync = sync || c.role(i, "/sync")
		}
		return sync || !c.opts.Synchronous
	})
	if err != nil {
		return fmt.Errorf("%w (logs in %s)", err, c.dir)
	}
	return nil
}

// KillNode loses node i as a machine is lost: its Patroni and its
// PostgreSQL get SIGKILL at once, nothing is shut down cleanly. Patroni on
// the other nodes promotes a standby once the leader key expires.
func (c *PGCluster) KillNode(i int) error {
	c.mu.Lock()
	n := c.nodes[i]
	c.mu.Unlock()
	pid, pidErr := postmasterPID(filepath.Join(n.dir, "data"))
	n.patroni.signal(syscall.SIGKILL, 10*time.Second)
	if pidErr != nil {
		return nil // no server was running
	}
	return killPID(pid)
}

// StartNode starts node i again after KillNode: it rejoins as a standby of
// the current primary.
func (c *PGCluster) StartNode(i int) error { return c.startNode(i) }

// CutReplication cuts the link standbys replicate from node i through:
// its streaming connections are closed and new ones refused until
// RestoreReplication, while clients still reach the server.
func (c *PGCluster) CutReplication(i int) { c.nodes[i].link.Cut() }

// RestoreReplication lets standbys replicate from node i again.
func (c *PGCluster) RestoreReplication(i int) { c.nodes[i].link.Restore() }

// Dir is the cluster's folder (the servers' and Patroni's logs are there).
func (c *PGCluster) Dir() string { return c.dir }

// Close stops every Patroni (which stops its server), etcd and the
// forwarders, and removes the data.
func (c *PGCluster) Close() error {
	var errs []error
	for _, n := range c.nodes {
		n.patroni.signal(syscall.SIGTERM, 30*time.Second)
		if pid, err := postmasterPID(filepath.Join(n.dir, "data")); err == nil && ProcessAlive(pid) {
			errs = append(errs, killPID(pid))
		}
		if n.link != nil {
			_ = n.link.Close()
		}
	}
	c.etcd.signal(syscall.SIGTERM, 10*time.Second)
	if err := os.RemoveAll(c.dir); err != nil {
		errs = append(errs, fmt.Errorf("remove %s: %w", c.dir, err))
	}
	return errors.Join(errs...)
}

// postmasterPID reads the server's pid from data/postmaster.pid.
func postmasterPID(data string) (int, error) {
	b, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strconv.Atoi(strings.TrimSpace(line))
}

// hostPort is "127.0.0.1:port".
func hostPort(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }
