// Package config describes the configuration every dubflow service shares
// and reads it from an environment given by the caller (main passes the
// process environment; nothing under pkg/ reads it by itself).
package config

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
)

// S3 locates the object store.
type S3 struct {
	Endpoint  string `env:"S3_ENDPOINT" envDefault:"localhost:9000"`
	AccessKey string `env:"S3_ACCESS_KEY" envDefault:"minioadmin"`
	SecretKey string `env:"S3_SECRET_KEY" envDefault:"minioadmin"`
	Bucket    string `env:"S3_BUCKET" envDefault:"dubflow"`
	UseSSL    bool   `env:"S3_USE_SSL" envDefault:"false"`
}

// S3Presign is the storage user that signs what clients get from the
// console (upload policies, download links): a user of the object store
// that may only write uploads/ and read outputs/ (services/migrate creates
// it on MinIO). Unset, the main credentials (S3) sign, which the console
// warns about: a leaked or mis-signed URL then reaches the whole bucket.
type S3Presign struct {
	AccessKey string `env:"S3_PRESIGN_ACCESS_KEY"`
	SecretKey string `env:"S3_PRESIGN_SECRET_KEY"`
}

// Set reports whether a presign user is configured.
func (p S3Presign) Set() bool { return p.AccessKey != "" }

// Validate checks the presign user against the main credentials: both
// settings or neither, a secret of at least 8 characters (MinIO's
// minimum), and another user than main's.
func (p S3Presign) Validate(main S3) error {
	switch {
	case p.AccessKey == "" && p.SecretKey == "":
		return nil
	case p.AccessKey == "" || p.SecretKey == "":
		return errors.New("S3_PRESIGN_ACCESS_KEY and S3_PRESIGN_SECRET_KEY go together: set both or neither")
	case len(p.SecretKey) < 8:
		return errors.New("S3_PRESIGN_SECRET_KEY: want at least 8 characters")
	case p.AccessKey == main.AccessKey:
		return errors.New("S3_PRESIGN_ACCESS_KEY must name another user than S3_ACCESS_KEY")
	}
	return nil
}

// Signing returns s with the presign user's credentials (s itself when
// none is set).
func (p S3Presign) Signing(s S3) S3 {
	if p.Set() {
		s.AccessKey, s.SecretKey = p.AccessKey, p.SecretKey
	}
	return s
}

// Common is the configuration of every service.
type Common struct {
	AMQPURL     string `env:"AMQP_URL" envDefault:"amqp://guest:guest@localhost:5672/"`
	DatabaseURL string `env:"DATABASE_URL" envDefault:"postgres://postgres@localhost:5432/dubflow?sslmode=disable"`
	// DatabaseWaitSeconds is how long a long-running service waits at start
	// for a database that is away or still starting (0: not at all).
	DatabaseWaitSeconds int `env:"DATABASE_WAIT_SECONDS" envDefault:"120"`
	S3                  S3
	// OpsAddr serves /healthz, /readyz and /metrics, unauthenticated: the
	// default listens on the loopback interface only, so that a plain
	// binary exposes nothing; compose and the Kubernetes manifests set
	// ":8081" (probes and scrapes come from outside the container).
	OpsAddr   string `env:"OPS_ADDR" envDefault:"127.0.0.1:8081"`
	LogLevel  string `env:"LOG_LEVEL" envDefault:"info"`
	LogFormat string `env:"LOG_FORMAT" envDefault:"json"`

	DefaultSourceLanguage string `env:"DEFAULT_SOURCE_LANGUAGE" envDefault:"en"`
	DefaultTargetLanguage string `env:"DEFAULT_TARGET_LANGUAGE" envDefault:"es"`

	// Concurrency is how many messages a worker handles at once (and its
	// prefetch); unset, Consumers sizes it by the cores the worker sees.
	Concurrency *int `env:"WORKER_CONCURRENCY"`
	// MaxRetries is the retry budget of a step: a transient failure is
	// retried up to 3 times (after 1 s, 2 s, 4 s), then sent to the DLQ with
	// retry_count 3 — with the default of 3; n retries wait 1 s, 2 s, 4 s, …
	// doubling.
	MaxRetries int `env:"STEP_MAX_RETRIES" envDefault:"3"`
	// LeaseSeconds is how long a step's claim lives without a heartbeat.
	LeaseSeconds int `env:"STEP_LEASE_SECONDS" envDefault:"30"`
	// ShutdownGraceSeconds is how long in-flight steps may finish on SIGTERM.
	ShutdownGraceSeconds int `env:"SHUTDOWN_GRACE_SECONDS" envDefault:"30"`
	// DeliveryLimit is the work queues' x-delivery-limit.
	DeliveryLimit int `env:"QUEUE_DELIVERY_LIMIT" envDefault:"20"`
	// BrokerConsumerTimeoutSeconds is the broker's consumer timeout
	// (RabbitMQ's consumer_timeout, 30 minutes unless rabbitmq.conf says
	// otherwise; 0 when it is disabled). A delivery left unacknowledged
	// longer closes the consumer's channel, so a worker refuses to start
	// with a step timeout that does not end StepTimeoutMargin before it.
	BrokerConsumerTimeoutSeconds int `env:"BROKER_CONSUMER_TIMEOUT_SECONDS" envDefault:"1800"`
}

// DatabaseWait is DatabaseWaitSeconds as a duration.
func (c Common) DatabaseWait() time.Duration {
	return time.Duration(c.DatabaseWaitSeconds) * time.Second
}

// StepTimeoutMargin is what a step timeout leaves below the broker's
// consumer timeout: time to record the outcome, publish with confirms and
// acknowledge the input.
const StepTimeoutMargin = 60 * time.Second

// StepTimeoutVar names the variable that sets a step's timeout:
// TIMEOUT_<STEP>_SECONDS, except TIMEOUT_MUX_SECONDS for mux_video.
func StepTimeoutVar(step string) string {
	if step == "mux_video" {
		return "TIMEOUT_MUX_SECONDS"
	}
	return "TIMEOUT_" + strings.ToUpper(step) + "_SECONDS"
}

// CheckStepTimeout refuses a step timeout that does not end
// StepTimeoutMargin before the broker's consumer timeout: the broker would
// cut the step off (close the channel, requeue the message) before the
// worker's own timeout records the failure.
func (c *Common) CheckStepTimeout(step string, timeout time.Duration) error {
	if c.BrokerConsumerTimeoutSeconds == 0 {
		return nil
	}
	limit := c.BrokerConsumerTimeout() - StepTimeoutMargin
	if timeout > limit {
		return fmt.Errorf("%s=%d: a step timeout must stay at least %d s below the broker's consumer timeout "+
			"(BROKER_CONSUMER_TIMEOUT_SECONDS=%d), so at most %d; otherwise RabbitMQ closes the channel mid-step "+
			"and requeues the message: lower %s, or raise consumer_timeout in rabbitmq.conf and "+
			"BROKER_CONSUMER_TIMEOUT_SECONDS with it (deploy/README.md)",
			StepTimeoutVar(step), int(timeout/time.Second), int(StepTimeoutMargin/time.Second),
			c.BrokerConsumerTimeoutSeconds, int(limit/time.Second), StepTimeoutVar(step))
	}
	return nil
}

// Validate checks values that parsing cannot.
func (c *Common) Validate() error {
	var errs []error
	// AMQP_URL names one node, or the nodes of a cluster separated by commas.
	for _, node := range strings.Split(c.AMQPURL, ",") {
		node = strings.TrimSpace(node)
		if u, err := url.Parse(node); err != nil || (u.Scheme != "amqp" && u.Scheme != "amqps") {
			errs = append(errs, fmt.Errorf("AMQP_URL %q: want amqp:// or amqps:// (several nodes separated by commas)", Redact(node)))
		}
	}
	if u, err := url.Parse(c.DatabaseURL); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		errs = append(errs, fmt.Errorf("DATABASE_URL: want postgres://"))
	}
	if c.S3.Endpoint == "" || c.S3.Bucket == "" {
		errs = append(errs, errors.New("S3_ENDPOINT and S3_BUCKET are required"))
	}
	if c.Concurrency != nil {
		errs = append(errs, Between("WORKER_CONCURRENCY", *c.Concurrency, 1, 256))
	}
	if c.MaxRetries < 0 || c.MaxRetries > 7 {
		errs = append(errs, fmt.Errorf("STEP_MAX_RETRIES %d: want 0..7 (the delay tiers end at 60s)", c.MaxRetries))
	}
	if c.DatabaseWaitSeconds < 0 {
		errs = append(errs, fmt.Errorf("DATABASE_WAIT_SECONDS %d: want 0 or more", c.DatabaseWaitSeconds))
	}
	errs = append(errs, AtLeast("STEP_LEASE_SECONDS", c.LeaseSeconds, 3))
	if c.BrokerConsumerTimeoutSeconds != 0 && c.BrokerConsumerTimeout() <= StepTimeoutMargin {
		errs = append(errs, fmt.Errorf("BROKER_CONSUMER_TIMEOUT_SECONDS %d: want 0 (the broker has none) or more than %d",
			c.BrokerConsumerTimeoutSeconds, int(StepTimeoutMargin/time.Second)))
	}
	if c.ShutdownGraceSeconds < 0 {
		errs = append(errs, fmt.Errorf("SHUTDOWN_GRACE_SECONDS %d: want 0 or more", c.ShutdownGraceSeconds))
	}
	switch c.LogFormat {
	case "json", "console":
	default:
		errs = append(errs, fmt.Errorf("LOG_FORMAT %q: want json or console", c.LogFormat))
	}
	return errors.Join(errs...)
}

// Lease is LeaseSeconds as a duration.
func (c *Common) Lease() time.Duration { return time.Duration(c.LeaseSeconds) * time.Second }

// BrokerConsumerTimeout is BrokerConsumerTimeoutSeconds as a duration.
func (c *Common) BrokerConsumerTimeout() time.Duration {
	return time.Duration(c.BrokerConsumerTimeoutSeconds) * time.Second
}

// ShutdownGrace is ShutdownGraceSeconds as a duration.
func (c *Common) ShutdownGrace() time.Duration {
	return time.Duration(c.ShutdownGraceSeconds) * time.Second
}

// Environ returns the process environment as a map, for Load.
func Environ() map[string]string {
	m := make(map[string]string)
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// Validator is a configuration struct that checks itself.
type Validator interface{ Validate() error }

// Service is a service's configuration: a struct that embeds Common (which
// gives it Shared) and checks itself.
type Service interface {
	Validator
	Shared() *Common
}

// Shared returns the configuration every service shares; a service's
// configuration gets it by embedding Common.
func (c *Common) Shared() *Common { return c }

// Load fills cfg (a pointer to a struct with env tags) from environ and
// validates it when it implements Validator.
func Load(environ map[string]string, cfg any) error {
	if err := env.ParseWithOptions(cfg, env.Options{Environment: environ}); err != nil {
		return fmt.Errorf("read configuration: %w", err)
	}
	if v, ok := cfg.(Validator); ok {
		if err := v.Validate(); err != nil {
			return fmt.Errorf("invalid configuration: %w", err)
		}
	}
	return nil
}

// Redact hides the password of a URL for logs.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable)"
	}
	return u.Redacted()
}
