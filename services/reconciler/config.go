package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/config"
)

// Config is the reconciler's configuration, read once from the environment.
// Seconds may be fractional (tests shorten them).
type Config struct {
	config.Common

	// IntervalSeconds is the time between passes.
	IntervalSeconds float64 `env:"RECONCILE_INTERVAL_SECONDS" envDefault:"30"`
	// StuckTaskSeconds is how long a part waiting for its message may go
	// without activity before the reconciler checks whether the message was
	// lost (and re-drives it only then).
	StuckTaskSeconds float64 `env:"STUCK_TASK_SECONDS" envDefault:"600"`
	// LeaseGraceSeconds is how long after its lease ran out a running step
	// is left to the broker's redelivery (another worker takes it over)
	// before the reconciler re-drives it.
	LeaseGraceSeconds float64 `env:"RECONCILE_LEASE_GRACE_SECONDS" envDefault:"60"`
	// OutboxAgeSeconds is how old an outbox row must be before the
	// reconciler publishes it (workers publish theirs at once).
	OutboxAgeSeconds float64 `env:"RECONCILE_OUTBOX_AGE_SECONDS" envDefault:"30"`
	// TaskMaxIdleSeconds ends (failed, with the reason) a queued or running
	// task that made no progress for this long with no step running.
	TaskMaxIdleSeconds float64 `env:"RECONCILE_TASK_MAX_IDLE_SECONDS" envDefault:"86400"`
	// CompensatingMaxSeconds ends (failed, with the reason) a task that
	// stayed compensating this long: nobody re-drove it with tts_requeue.
	CompensatingMaxSeconds float64 `env:"RECONCILE_COMPENSATING_MAX_SECONDS" envDefault:"259200"`
	// Batch bounds what one pass handles of each kind.
	Batch int `env:"RECONCILE_BATCH_SIZE" envDefault:"100"`
}

// Validate checks what parsing cannot.
func (c *Config) Validate() error {
	errs := []error{c.Common.Validate()}
	errs = append(errs, config.Positive("RECONCILE_INTERVAL_SECONDS", c.IntervalSeconds),
		config.Positive("STUCK_TASK_SECONDS", c.StuckTaskSeconds),
		config.Positive("RECONCILE_COMPENSATING_MAX_SECONDS", c.CompensatingMaxSeconds),
		config.Between("RECONCILE_BATCH_SIZE", c.Batch, 1, 10000))
	if c.LeaseGraceSeconds < 0 || c.OutboxAgeSeconds < 0 {
		errs = append(errs, errors.New("RECONCILE_LEASE_GRACE_SECONDS and RECONCILE_OUTBOX_AGE_SECONDS must not be negative"))
	}
	if c.TaskMaxIdleSeconds <= c.StuckTaskSeconds {
		errs = append(errs, fmt.Errorf("RECONCILE_TASK_MAX_IDLE_SECONDS %v: want more than STUCK_TASK_SECONDS (%v), or tasks end before a lost message is re-driven",
			c.TaskMaxIdleSeconds, c.StuckTaskSeconds))
	}
	return errors.Join(errs...)
}

// Interval is the time between passes.
func (c *Config) Interval() time.Duration { return config.Seconds(c.IntervalSeconds) }

// Settings returns the pass settings.
func (c *Config) Settings() Settings {
	return Settings{
		StuckTask:       config.Seconds(c.StuckTaskSeconds),
		LeaseGrace:      config.Seconds(c.LeaseGraceSeconds),
		Settle:          settle,
		OutboxAge:       config.Seconds(c.OutboxAgeSeconds),
		TaskMaxIdle:     config.Seconds(c.TaskMaxIdleSeconds),
		CompensatingMax: config.Seconds(c.CompensatingMaxSeconds),
		Batch:           c.Batch,
	}
}

// settle is how young a part may be and still be left out of the count of
// parts waiting for a message: its message may be between the outbox and
// the queue while the count is taken.
const settle = 10 * time.Second
