// Package service is the lifecycle every long-running dubflow process
// shares: read the configuration once, build the logger, wait for Postgres,
// connect to the broker (a publishing connection, and a consuming one for
// services that consume), serve /healthz, /readyz and /metrics beside the
// service's own jobs, stop them all on SIGINT or SIGTERM and release every
// connection. A service's main names what it runs; everything else lives
// here, once.
package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/ops"
	"github.com/dubflow/dubflow/pkg/setting"
	"github.com/dubflow/dubflow/pkg/store"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"
)

// Main is a service's main: it runs run with the process environment until
// SIGINT or SIGTERM, and exits 1 with the error, if any, on standard error.
func Main(name string, run func(ctx context.Context, environ map[string]string) error) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, config.Environ())
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// NewLogger returns the service's structured logger writing to w (standard
// output when w is nil), at LOG_LEVEL and in LOG_FORMAT.
func NewLogger(name string, cfg config.Common, w io.Writer) zerolog.Logger {
	if w == nil {
		w = os.Stdout
	}
	if cfg.LogFormat == "console" {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.RFC3339}
	}
	level, err := zerolog.ParseLevel(cfg.LogLevel)
	if err != nil || cfg.LogLevel == "" {
		level = zerolog.InfoLevel
	}
	return zerolog.New(w).Level(level).With().Timestamp().Str("service", name).Logger()
}

// OpenDB connects a long-running service to Postgres, waiting up to
// DATABASE_WAIT_SECONDS for a database that is away or still starting (a
// service started before its database, or during a Postgres restart)
// instead of exiting, and logging each retry.
func OpenDB(ctx context.Context, cfg config.Common, log zerolog.Logger) (*pgxpool.Pool, error) {
	return store.OpenWait(ctx, cfg.DatabaseURL, cfg.DatabaseWait(), func(err error, next time.Duration) {
		log.Warn().Err(err).Dur("retry_in", next).Msg("database not reachable yet; waiting")
	})
}

// Option chooses what Start opens besides Postgres and the publishing
// connection.
type Option func(*options)

type options struct {
	migrate bool
	blob    bool
	logOut  io.Writer
	environ map[string]string
}

// Migrate applies the schema migrations after connecting to Postgres, for
// services that may start before any other has migrated the database.
func Migrate() Option { return func(o *options) { o.migrate = true } }

// WithBlob opens the object store (S3_*) as Process.Blob.
func WithBlob() Option { return func(o *options) { o.blob = true } }

// LogTo writes the service's log to w instead of standard output.
func LogTo(w io.Writer) Option { return func(o *options) { o.logOut = w } }

// Process is a started service: its configuration, logger and connections.
type Process struct {
	Name     string
	Config   config.Common
	Log      zerolog.Logger
	Pool     *pgxpool.Pool
	Blob     *blob.Store // nil unless started WithBlob
	Registry *prometheus.Registry
	// Topology is the broker topology the service declares on connecting.
	Topology broker.Topology
	// BrokerMetrics count the connections' reconnects and publishes.
	BrokerMetrics *broker.Metrics
	// Settings are the run-time settings (pkg/setting): seeded for the
	// service at start, read again while it runs (Run watches them).
	Settings *setting.Watch

	pubConn  *broker.Conn
	pub      *broker.Publisher
	consConn *broker.Conn
	checks   map[string]ops.Check
}

// Start reads cfg (a pointer to a struct that embeds config.Common) from
// environ, builds the logger, connects to Postgres (waiting for it), and
// opens the broker's publishing connection, declaring the topology. The
// caller defers Close.
func Start(ctx context.Context, name string, environ map[string]string, cfg config.Service, opts ...Option) (*Process, error) {
	if err := config.Load(environ, cfg); err != nil {
		return nil, err
	}
	return Open(ctx, name, *cfg.Shared(), append(opts, func(o *options) { o.environ = environ })...)
}

// Open is Start with the configuration already read (the run-time
// settings the service uses are seeded with their defaults).
func Open(ctx context.Context, name string, cfg config.Common, opts ...Option) (*Process, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	log := NewLogger(name, cfg, o.logOut)
	p := &Process{Name: name, Config: cfg, Log: log, Registry: ops.NewRegistry(),
		Topology: broker.Topology{DeliveryLimit: cfg.DeliveryLimit}}
	p.Registry.MustRegister(store.Collectors()...)
	if err := p.open(ctx, o); err != nil {
		p.Close()
		return nil, err
	}
	p.checks = map[string]ops.Check{
		"postgres": func(ctx context.Context) error { return p.Pool.Ping(ctx) },
		"broker": func(context.Context) error {
			if !p.pubConn.Connected() {
				return errors.New("publishing connection down")
			}
			return nil
		},
	}
	return p, nil
}

func (p *Process) open(ctx context.Context, o options) error {
	var err error
	if p.Pool, err = OpenDB(ctx, p.Config, p.Log); err != nil {
		return err
	}
	if o.migrate {
		if err := store.Migrate(ctx, p.Pool); err != nil {
			return err
		}
	}
	p.Settings = setting.NewWatch(p.Pool, p.Name, o.environ, p.Log)
	if err := p.Settings.Start(ctx); err != nil {
		return fmt.Errorf("settings: %w", err)
	}
	p.Registry.MustRegister(p.Settings.Collector())
	if o.blob {
		if p.Blob, err = blob.New(p.Config.S3); err != nil {
			return err
		}
	}
	if p.BrokerMetrics, err = broker.NewMetrics(p.Registry); err != nil {
		return err
	}
	p.pubConn, err = p.dial(ctx, "publish")
	if err != nil {
		return err
	}
	p.pub = broker.NewPublisher(p.pubConn)
	return nil
}

func (p *Process) dial(ctx context.Context, role string) (*broker.Conn, error) {
	return broker.Dial(ctx, p.Config.AMQPURL, p.Name+"-"+role, p.Log,
		broker.WithTopology(p.Topology), broker.WithMetrics(p.BrokerMetrics))
}

// Publisher publishes with confirms on the publishing connection.
func (p *Process) Publisher() *broker.Publisher { return p.pub }

// PublishConn is the publishing connection (for queue depths, say).
func (p *Process) PublishConn() *broker.Conn { return p.pubConn }

// Consumer returns the process's consuming connection, dialling it on the
// first call. Consuming apart from publishing keeps a slow consumer's flow
// control off the publishes.
func (p *Process) Consumer(ctx context.Context) (*broker.Conn, error) {
	if p.consConn != nil {
		return p.consConn, nil
	}
	conn, err := p.dial(ctx, "consume")
	if err != nil {
		return nil, err
	}
	p.consConn = conn
	return conn, nil
}

// Ready adds a readiness check served on /readyz beside the postgres and
// broker checks every process has. Call it before Run.
func (p *Process) Ready(name string, check ops.Check) { p.checks[name] = check }

// Job is one of a service's long-running jobs: it works until ctx is
// cancelled and then returns nil, or returns the error that stops it.
type Job func(ctx context.Context) error

// Run runs jobs until ctx is cancelled or one of them fails, serving the
// ops endpoints beside them on OPS_ADDR and watching the run-time settings. The ops endpoints stay up until
// every job has returned, so a graceful stop stays observable. A failing
// job (or ops server) cancels the others; Run returns its error.
func (p *Process) Run(ctx context.Context, jobs ...Job) error {
	g, gctx := errgroup.WithContext(ctx)
	opsCtx, stopOps := context.WithCancel(context.WithoutCancel(ctx))
	defer stopOps()
	g.Go(func() error {
		err := ops.Serve(opsCtx, p.Config.OpsAddr, ops.Handler(p.Registry, p.checks), p.Log)
		if err != nil && opsCtx.Err() == nil {
			return err
		}
		return nil
	})
	// The settings are watched while the jobs run.
	watchCtx, stopWatch := context.WithCancel(gctx)
	defer stopWatch()
	g.Go(func() error { return p.Settings.Run(watchCtx) })
	var running sync.WaitGroup
	for _, job := range jobs {
		running.Add(1)
		g.Go(func() error {
			defer running.Done()
			return job(gctx)
		})
	}
	g.Go(func() error {
		running.Wait()
		stopWatch()
		stopOps()
		return nil
	})
	if err := g.Wait(); err != nil {
		return fmt.Errorf("%s: %w", p.Name, err)
	}
	p.Log.Info().Msg("service stopped")
	return nil
}

// Close releases every connection.
func (p *Process) Close() {
	if p.pub != nil {
		_ = p.pub.Close()
	}
	if p.consConn != nil {
		_ = p.consConn.Close()
	}
	if p.pubConn != nil {
		_ = p.pubConn.Close()
	}
	if p.Pool != nil {
		p.Pool.Close()
	}
}
