package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/services/dispatcher/internal/queue"
)

// Config is the dispatcher's configuration, read once from the environment.
type Config struct {
	config.Common

	// HTTPAddr is the API's listen address; besides the API it answers only
	// /healthz. /readyz and /metrics are on OPS_ADDR (config.Common).
	HTTPAddr string `env:"DISPATCHER_HTTP_ADDR" envDefault:":8090"`
	// APIToken is the bearer token every API request must carry.
	APIToken string `env:"DISPATCHER_API_TOKEN,required"`

	// How the queue is processed: a scan every IntervalSeconds attempts up
	// to BatchSize entries, MaxWorkers at once; an entry expires after
	// ProcessMaxRetries unsuccessful attempts at least RetryDelaySeconds
	// apart.
	// Seconds may be fractional (tests shorten them).
	ProcessEnabled    bool    `env:"QUEUE_PROCESS_ENABLED" envDefault:"true"`
	IntervalSeconds   float64 `env:"QUEUE_PROCESS_INTERVAL_SECONDS" envDefault:"5"`
	BatchSize         int     `env:"QUEUE_PROCESS_BATCH_SIZE" envDefault:"50"`
	MaxWorkers        int     `env:"QUEUE_PROCESS_MAX_WORKERS" envDefault:"5"`
	ProcessMaxRetries int     `env:"QUEUE_PROCESS_MAX_RETRIES" envDefault:"3"`
	RetryDelaySeconds float64 `env:"QUEUE_PROCESS_RETRY_DELAY_SECONDS" envDefault:"60"`

	// ReservationTimeoutSeconds: an assignment not confirmed within this
	// time expires and gives the agent's unit back; 0 confirms assignments
	// at once.
	ReservationTimeoutSeconds float64 `env:"QUEUE_RESERVATION_TIMEOUT_SECONDS" envDefault:"60"`
	// StuckEntrySeconds: how far past due an entry must be to count in
	// dubflow_dispatcher_stuck_entries.
	StuckEntrySeconds float64 `env:"QUEUE_STUCK_ENTRY_SECONDS" envDefault:"600"`

	// QueueMaxN is the number of orders one agent may have queued; one more
	// is refused with BUSINESS_QUEUE_FULL.
	QueueMaxN int `env:"QUEUE_MAX_N" envDefault:"10"`
}

// Validate checks what parsing cannot.
func (c *Config) Validate() error {
	errs := []error{c.Common.Validate()}
	if len(c.APIToken) < 16 {
		errs = append(errs, errors.New("DISPATCHER_API_TOKEN: want at least 16 characters"))
	}
	if c.OpsAddr == "" || c.OpsAddr == c.HTTPAddr {
		errs = append(errs, fmt.Errorf("OPS_ADDR %q: want an address of its own, not DISPATCHER_HTTP_ADDR's (metrics and readiness stay off the public port)", c.OpsAddr))
	}
	if c.IntervalSeconds <= 0 {
		errs = append(errs, fmt.Errorf("QUEUE_PROCESS_INTERVAL_SECONDS %v: want more than 0", c.IntervalSeconds))
	}
	if c.BatchSize < 1 || c.BatchSize > 10000 {
		errs = append(errs, fmt.Errorf("QUEUE_PROCESS_BATCH_SIZE %d: want 1..10000", c.BatchSize))
	}
	if c.MaxWorkers < 1 || c.MaxWorkers > 256 {
		errs = append(errs, fmt.Errorf("QUEUE_PROCESS_MAX_WORKERS %d: want 1..256", c.MaxWorkers))
	}
	if c.ProcessMaxRetries < 1 {
		errs = append(errs, fmt.Errorf("QUEUE_PROCESS_MAX_RETRIES %d: want at least 1", c.ProcessMaxRetries))
	}
	if c.ReservationTimeoutSeconds < 0 {
		errs = append(errs, fmt.Errorf("QUEUE_RESERVATION_TIMEOUT_SECONDS %v: want 0 (off) or more", c.ReservationTimeoutSeconds))
	}
	if c.StuckEntrySeconds <= 0 {
		errs = append(errs, fmt.Errorf("QUEUE_STUCK_ENTRY_SECONDS %v: want more than 0", c.StuckEntrySeconds))
	}
	if c.QueueMaxN < 1 || c.QueueMaxN > 10000 {
		errs = append(errs, fmt.Errorf("QUEUE_MAX_N %d: want 1..10000", c.QueueMaxN))
	}
	if c.RetryDelaySeconds < 0 {
		errs = append(errs, fmt.Errorf("QUEUE_PROCESS_RETRY_DELAY_SECONDS %v: want 0 or more", c.RetryDelaySeconds))
	}
	return errors.Join(errs...)
}

// Interval is the scan interval.
func (c *Config) Interval() time.Duration { return seconds(c.IntervalSeconds) }

// Queue is the domain's part of the configuration.
func (c *Config) Queue() queue.Config {
	return queue.Config{MaxRetries: c.ProcessMaxRetries, RetryDelay: seconds(c.RetryDelaySeconds),
		BatchSize: c.BatchSize, MaxWorkers: c.MaxWorkers,
		ReservationTimeout: seconds(c.ReservationTimeoutSeconds), StuckAfter: seconds(c.StuckEntrySeconds)}
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// loadConfig reads the configuration from environ.
func loadConfig(environ map[string]string) (Config, error) {
	var cfg Config
	err := config.Load(environ, &cfg)
	return cfg, err
}
