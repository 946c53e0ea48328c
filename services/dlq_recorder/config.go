package main

import (
	"errors"

	"github.com/dubflow/dubflow/pkg/config"
)

// Config is the recorder's configuration, read once from the environment.
type Config struct {
	config.Common

	// RecordConcurrency is how many dead letters (and, apart, compensation
	// messages) are recorded at once. It is not WORKER_CONCURRENCY
	// (config.Common.Concurrency), which the recorder does not use.
	RecordConcurrency int `env:"DLQ_RECORDER_CONCURRENCY" envDefault:"4"`
}

// Validate checks what parsing cannot.
func (c *Config) Validate() error {
	return errors.Join(c.Common.Validate(), config.Between("DLQ_RECORDER_CONCURRENCY", c.RecordConcurrency, 1, 64))
}
