package step

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
)

// Config configures a Runner.
type Config struct {
	// Queue names the consumed queue, for logs and metrics.
	Queue  string
	Routes []Route
	Pool   *pgxpool.Pool
	Source Source
	// Publisher publishes on a connection of its own (not Source's).
	Publisher Publisher
	Delay     DelayFunc
	// DLQ is the dead-letter queue, published to through the default exchange.
	DLQ string
	// Worker identifies this process in the step attempts it claims
	// (pkg/attempt); default host-pid-random.
	Worker string
	// MaxRetries is the retry budget: how many times a transiently failed
	// step is tried again before it is dead-lettered; zero means never. The
	// services use 3 (STEP_MAX_RETRIES): a step runs at most 4 times,
	// retried after 1s, 2s and 4s.
	MaxRetries int
	// MaxWaits gives the engine waits (fault.Wait) a part may have in one
	// retry budget: the next wait ends the attempt dead-lettered with the
	// reason. Read at each wait, so it may change while the runner runs;
	// nil: DefaultMaxWaits, 0 or less: unbounded.
	MaxWaits func() int
	// Backoff gives the delay after failed try n (1-based) of a budget;
	// default 1s, 2s, 4s, ... doubling.
	Backoff func(n int) time.Duration
	// Lease is how long a claim lives without a heartbeat (default 30s).
	Lease time.Duration
	// DependencyWait bounds how long a message waits for its predecessor
	// step before it is dead-lettered (default 1h).
	DependencyWait time.Duration
	// DeliveryLimit is the queue's x-delivery-limit (default
	// broker.DefaultDeliveryLimit). The runtime dead-letters a message
	// handed back this often, counting the hand-backs before each trip
	// through a delay tier, which the broker's count forgets.
	DeliveryLimit int
	// HandBackPause gives the pause before the n-th hand-back in a row
	// (Settler.Pause); default 1s, 2s, 4s, ... 30s. Tests shorten it.
	HandBackPause func(n int32) time.Duration
	// SweepInterval and SweepAge drive the outbox sweep (defaults 2s, 10s).
	SweepInterval, SweepAge time.Duration
	// Watch tells the runner when the work of a task it runs stopped (the
	// task was cancelled or failed): the step's context is cancelled at
	// once and the attempt closed without retry or dead letter. One per
	// process (pkg/worker makes it); nil: only the lease heartbeat, which
	// reads the same, notices it (within a third of the lease).
	Watch *task.Watcher
	// ShutdownGrace is how long in-flight steps may finish after shutdown
	// begins before their contexts are cancelled (default 30s).
	ShutdownGrace time.Duration
	Log           zerolog.Logger
	Metrics       *Metrics
	// Middleware wraps every route's handler inside the runtime's own
	// (Recover, Tracing, Logging, Metrics.Middleware), the first outermost.
	Middleware []Middleware
}

func (c *Config) defaults() error {
	if c.Pool == nil || c.Source == nil || c.Publisher == nil || c.Delay == nil {
		return errors.New("step runner: Pool, Source, Publisher and Delay are required")
	}
	if len(c.Routes) == 0 {
		return errors.New("step runner: no routes")
	}
	if c.DLQ == "" {
		c.DLQ = wire.QueueDLQ
	}
	if c.Worker == "" {
		host, _ := os.Hostname()
		c.Worker = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), uuid.NewString()[:8])
	}
	if c.MaxRetries < 0 {
		return errors.New("step runner: MaxRetries must not be negative")
	}
	if c.MaxWaits == nil {
		c.MaxWaits = func() int { return DefaultMaxWaits }
	}
	if c.Backoff == nil {
		c.Backoff = func(n int) time.Duration { return time.Second << min(n-1, 6) }
	}
	if c.Lease <= 0 {
		c.Lease = 30 * time.Second
	}
	if c.DependencyWait <= 0 {
		c.DependencyWait = time.Hour
	}
	if c.DeliveryLimit <= 0 {
		c.DeliveryLimit = broker.DefaultDeliveryLimit
	}
	if c.SweepInterval <= 0 {
		c.SweepInterval = 2 * time.Second
	}
	if c.SweepAge <= 0 {
		c.SweepAge = 10 * time.Second
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = 30 * time.Second
	}
	if c.Metrics == nil {
		c.Metrics = NewMetrics(nil)
	}
	for _, r := range c.Routes {
		if r.Step == "" || r.Handler == nil {
			return fmt.Errorf("step runner: route %q has no step name or handler", r.Step)
		}
		if r.Timeout <= 0 {
			return fmt.Errorf("step runner: route %q has no timeout", r.Step)
		}
	}
	return nil
}
