// Package worker wires a dubflow service together: logger, Postgres pool,
// object store, the two broker connections (publishing and consuming apart),
// the step runtime and the ops endpoints. A service's main builds its routes
// and calls Serve; everything else lives here, once.
package worker

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
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/store"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"
)

// NewLogger returns the service's structured logger.
func NewLogger(service string, cfg config.Common, w io.Writer) zerolog.Logger {
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
	return zerolog.New(w).Level(level).With().Timestamp().Str("service", service).Logger()
}

// Deps are the connections a service works with.
type Deps struct {
	Service  string
	Config   config.Common
	Log      zerolog.Logger
	Pool     *pgxpool.Pool
	Blob     *blob.Store
	Registry *prometheus.Registry

	pubConn *broker.Conn
	pub     *broker.Publisher
	topo    broker.Topology
	metrics *broker.Metrics
}

// Open connects to Postgres, the object store and the broker's publishing
// connection, declaring the topology. Close releases them.
func Open(ctx context.Context, service string, cfg config.Common, log zerolog.Logger) (*Deps, error) {
	d := &Deps{Service: service, Config: cfg, Log: log, Registry: ops.NewRegistry(),
		topo: broker.Topology{DeliveryLimit: cfg.DeliveryLimit}}
	pool, err := OpenDB(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	d.Pool = pool
	if d.Blob, err = blob.New(cfg.S3); err != nil {
		d.Close()
		return nil, err
	}
	if d.metrics, err = broker.NewMetrics(d.Registry); err != nil {
		d.Close()
		return nil, err
	}
	d.pubConn, err = broker.Dial(ctx, cfg.AMQPURL, service+"-publish", log,
		broker.WithTopology(d.topo), broker.WithMetrics(d.metrics))
	if err != nil {
		d.Close()
		return nil, err
	}
	d.pub = broker.NewPublisher(d.pubConn)
	return d, nil
}

// Publisher publishes with confirms on the publishing connection.
func (d *Deps) Publisher() *broker.Publisher { return d.pub }

// Close releases every connection.
func (d *Deps) Close() {
	if d.pubConn != nil {
		_ = d.pubConn.Close()
	}
	if d.Pool != nil {
		d.Pool.Close()
	}
}

// Serve removes the service's stale scratch folders, then consumes queue
// with routes until ctx is cancelled, serving the ops endpoints beside it,
// and returns after a graceful stop.
//
// It refuses a route whose timeout does not end well before the broker's
// consumer timeout (config.Common.CheckStepTimeout). The queue is consumed by
// WORKER_CONCURRENCY consumers, each handling one message at a time under a
// worker id of its own (WorkerIDs): a lease names the one consumer that holds
// it, so a consumer of the same process can never take over a step another
// one is still running as if it were its own.
func (d *Deps) Serve(ctx context.Context, queue string, routes []step.Route) error {
	cfg := d.Config
	for _, r := range routes {
		if err := cfg.CheckStepTimeout(r.Step, r.Timeout); err != nil {
			return fmt.Errorf("%s: %w", d.Service, err)
		}
	}
	d.removeStaleTemp(routes)
	consConn, err := broker.Dial(ctx, cfg.AMQPURL, d.Service+"-consume", d.Log,
		broker.WithTopology(d.topo), broker.WithMetrics(d.metrics))
	if err != nil {
		return err
	}
	defer consConn.Close()
	metrics := step.NewMetrics(d.Registry)
	ids := WorkerIDs(d.Service, max(cfg.Concurrency, 1))
	runners := make([]*step.Runner, len(ids))
	for i, id := range ids {
		runners[i], err = step.NewRunner(step.Config{
			Queue:  queue,
			Routes: routes,
			Pool:   d.Pool,
			Source: Source(consConn, broker.ConsumeOptions{
				Queue: queue, Prefetch: 1, Concurrency: 1, Tag: fmt.Sprintf("%s-%d", d.Service, i+1),
			}),
			Worker:        id,
			Publisher:     d.pub,
			Delay:         d.topo.DelayExchange,
			DLQ:           broker.DLQ,
			MaxRetries:    cfg.MaxRetries,
			DeliveryLimit: d.topo.DeliveryLimit,
			Lease:         cfg.Lease(),
			ShutdownGrace: cfg.ShutdownGrace(),
			Log:           d.Log.With().Str("worker", id).Logger(),
			Metrics:       metrics,
		})
		if err != nil {
			return err
		}
	}
	checks := map[string]ops.Check{
		"consumer": func(context.Context) error {
			for _, r := range runners {
				if !r.Running() {
					return errors.New("not consuming")
				}
			}
			if !consConn.Consuming() {
				return errors.New("not consuming")
			}
			return nil
		},
		"broker": func(context.Context) error {
			if !d.pubConn.Connected() {
				return errors.New("publishing connection down")
			}
			return nil
		},
		"postgres": func(ctx context.Context) error { return d.Pool.Ping(ctx) },
	}
	g, gctx := errgroup.WithContext(ctx)
	opsCtx, stopOps := context.WithCancel(context.WithoutCancel(ctx))
	g.Go(func() error {
		err := ops.Serve(opsCtx, cfg.OpsAddr, ops.Handler(d.Registry, checks), d.Log)
		if err != nil && opsCtx.Err() == nil {
			return err
		}
		return nil
	})
	var running sync.WaitGroup
	for _, r := range runners {
		running.Add(1)
		g.Go(func() error {
			defer running.Done()
			return r.Run(gctx)
		})
	}
	g.Go(func() error {
		running.Wait()
		stopOps()
		return nil
	})
	if err := g.Wait(); err != nil {
		return fmt.Errorf("%s: %w", d.Service, err)
	}
	return nil
}

// WorkerIDs returns n worker ids for one process of service, one per
// consumer: service, host, process id, a random tag (a restarted process with
// the same pid is someone else) and the consumer's number.
func WorkerIDs(service string, n int) []string {
	host, _ := os.Hostname()
	base := fmt.Sprintf("%s-%s-%d-%s", service, host, os.Getpid(), uuid.NewString()[:8])
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%d", base, i+1)
	}
	return ids
}

// Source adapts a broker consumer to the step runtime.
func Source(conn *broker.Conn, opts broker.ConsumeOptions) step.Source {
	return source{conn: conn, opts: opts}
}

type source struct {
	conn *broker.Conn
	opts broker.ConsumeOptions
}

func (s source) Consume(ctx context.Context, handle func(context.Context, step.Delivery)) error {
	return s.conn.Consume(ctx, s.opts, func(ctx context.Context, d *broker.Delivery) {
		handle(ctx, step.Delivery{
			Body:       d.Body,
			RoutingKey: d.RoutingKey,
			Headers:    d.Headers,
			Ack:        d.Ack,
			Nack:       func(requeue bool) error { return d.Nack(requeue) },
		})
	})
}

// Main is a worker's main: it runs run with the process environment until
// SIGINT or SIGTERM, and exits 1 with the error, if any, on standard error.
func Main(service string, run func(ctx context.Context, environ map[string]string) error) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, config.Environ())
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, service+":", err)
		os.Exit(1)
	}
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
