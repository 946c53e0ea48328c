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
	// StuckTaskSeconds is how long a queued or running task may go without
	// progress (and without a live step) before it is re-driven.
	StuckTaskSeconds float64 `env:"STUCK_TASK_SECONDS" envDefault:"600"`
	// LeaseGraceSeconds is how long after its lease ran out a running step
	// is left to the broker's redelivery (another worker takes it over)
	// before the reconciler re-drives it.
	LeaseGraceSeconds float64 `env:"RECONCILE_LEASE_GRACE_SECONDS" envDefault:"60"`
	// OutboxAgeSeconds is how old an outbox row must be before the
	// reconciler publishes it (workers publish theirs at once).
	OutboxAgeSeconds float64 `env:"RECONCILE_OUTBOX_AGE_SECONDS" envDefault:"30"`
	// Batch bounds what one pass handles of each kind.
	Batch int `env:"RECONCILE_BATCH_SIZE" envDefault:"100"`
}

// Validate checks what parsing cannot.
func (c *Config) Validate() error {
	errs := []error{c.Common.Validate()}
	if c.IntervalSeconds <= 0 {
		errs = append(errs, fmt.Errorf("RECONCILE_INTERVAL_SECONDS %v: want more than 0", c.IntervalSeconds))
	}
	if c.StuckTaskSeconds <= 0 {
		errs = append(errs, fmt.Errorf("STUCK_TASK_SECONDS %v: want more than 0", c.StuckTaskSeconds))
	}
	if c.LeaseGraceSeconds < 0 || c.OutboxAgeSeconds < 0 {
		errs = append(errs, errors.New("RECONCILE_LEASE_GRACE_SECONDS and RECONCILE_OUTBOX_AGE_SECONDS must not be negative"))
	}
	if c.Batch < 1 || c.Batch > 10000 {
		errs = append(errs, fmt.Errorf("RECONCILE_BATCH_SIZE %d: want 1..10000", c.Batch))
	}
	return errors.Join(errs...)
}

// Settings returns the pass settings.
func (c *Config) Settings() Settings {
	return Settings{
		StuckTask:  seconds(c.StuckTaskSeconds),
		LeaseGrace: seconds(c.LeaseGraceSeconds),
		OutboxAge:  seconds(c.OutboxAgeSeconds),
		Batch:      c.Batch,
	}
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func loadConfig(environ map[string]string) (Config, error) {
	var cfg Config
	err := config.Load(environ, &cfg)
	return cfg, err
}
