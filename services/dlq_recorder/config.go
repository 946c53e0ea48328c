package main

import (
	"errors"
	"fmt"

	"github.com/dubflow/dubflow/pkg/config"
)

// Config is the recorder's configuration, read once from the environment.
type Config struct {
	config.Common

	// Concurrency is how many dead letters (and, apart, compensation
	// messages) are recorded at once.
	Concurrency int `env:"DLQ_RECORDER_CONCURRENCY" envDefault:"4"`
}

// Validate checks what parsing cannot.
func (c *Config) Validate() error {
	errs := []error{c.Common.Validate()}
	if c.Concurrency < 1 || c.Concurrency > 64 {
		errs = append(errs, fmt.Errorf("DLQ_RECORDER_CONCURRENCY %d: want 1..64", c.Concurrency))
	}
	return errors.Join(errs...)
}

// loadConfig reads the configuration from environ.
func loadConfig(environ map[string]string) (Config, error) {
	var cfg Config
	err := config.Load(environ, &cfg)
	return cfg, err
}
