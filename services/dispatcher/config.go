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
	// /healthz. /readyz and /metrics are on OPS_ADDR (config.Common). The
	// default listens on the loopback interface only, as the console does;
	// a deployment that serves other machines (Kubernetes, compose) sets it
	// to the pod's address (":8090").
	HTTPAddr string `env:"DISPATCHER_HTTP_ADDR" envDefault:"127.0.0.1:8090"`
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
	// AgentStatusPublic serves GET /queue/agents/{agentId}/status without
	// the token (seed 002 lists it as public); a token-less caller sees
	// counts, positions and arrival times, no id but the agent's. false:
	// the route needs the token like every other. An environment variable
	// until the run-time settings (system_config) take it.
	AgentStatusPublic bool `env:"QUEUE_AGENT_STATUS_PUBLIC" envDefault:"true"`
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
	errs = append(errs, config.Positive("QUEUE_PROCESS_INTERVAL_SECONDS", c.IntervalSeconds),
		config.Between("QUEUE_PROCESS_BATCH_SIZE", c.BatchSize, 1, 10000),
		config.Between("QUEUE_PROCESS_MAX_WORKERS", c.MaxWorkers, 1, 256),
		config.AtLeast("QUEUE_PROCESS_MAX_RETRIES", c.ProcessMaxRetries, 1),
		config.NotNegative("QUEUE_RESERVATION_TIMEOUT_SECONDS", c.ReservationTimeoutSeconds, "0 (off) or more"),
		config.Positive("QUEUE_STUCK_ENTRY_SECONDS", c.StuckEntrySeconds),
		config.Between("QUEUE_MAX_N", c.QueueMaxN, 1, 10000),
		config.NotNegative("QUEUE_PROCESS_RETRY_DELAY_SECONDS", c.RetryDelaySeconds, "0 or more"))
	return errors.Join(errs...)
}

// Interval is the scan interval.
func (c *Config) Interval() time.Duration { return config.Seconds(c.IntervalSeconds) }

// Queue is the domain's part of the configuration.
func (c *Config) Queue() queue.Config {
	return queue.Config{MaxRetries: c.ProcessMaxRetries, RetryDelay: config.Seconds(c.RetryDelaySeconds),
		BatchSize: c.BatchSize, MaxWorkers: c.MaxWorkers,
		ReservationTimeout: config.Seconds(c.ReservationTimeoutSeconds), StuckAfter: config.Seconds(c.StuckEntrySeconds),
		AgentQueueMax: c.QueueMaxN}
}

// loadConfig reads the configuration from environ.
func loadConfig(environ map[string]string) (Config, error) {
	var cfg Config
	err := config.Load(environ, &cfg)
	return cfg, err
}
