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
	"syscall"
	"time"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/ops"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/store"
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
	pool, err := store.Open(ctx, cfg.DatabaseURL)
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
func (d *Deps) Serve(ctx context.Context, queue string, routes []step.Route) error {
	cfg := d.Config
	d.removeStaleTemp(routes)
	consConn, err := broker.Dial(ctx, cfg.AMQPURL, d.Service+"-consume", d.Log,
		broker.WithTopology(d.topo), broker.WithMetrics(d.metrics))
	if err != nil {
		return err
	}
	defer consConn.Close()
	runner, err := step.NewRunner(step.Config{
		Queue:  queue,
		Routes: routes,
		Pool:   d.Pool,
		Source: Source(consConn, broker.ConsumeOptions{
			Queue: queue, Prefetch: cfg.Concurrency, Concurrency: cfg.Concurrency, Tag: d.Service,
		}),
		Publisher:     d.pub,
		Delay:         d.topo.DelayExchange,
		DLQ:           broker.DLQ,
		MaxRetries:    cfg.MaxRetries,
		DeliveryLimit: d.topo.DeliveryLimit,
		Lease:         cfg.Lease(),
		ShutdownGrace: cfg.ShutdownGrace(),
		Log:           d.Log,
		Metrics:       step.NewMetrics(d.Registry),
	})
	if err != nil {
		return err
	}
	checks := map[string]ops.Check{
		"consumer": func(context.Context) error {
			if !runner.Running() || !consConn.Consuming() {
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
	g.Go(func() error {
		defer stopOps()
		return runner.Run(gctx)
	})
	if err := g.Wait(); err != nil {
		return fmt.Errorf("%s: %w", d.Service, err)
	}
	return nil
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
