package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/media"
)

// Config is mux_video's configuration, read once from the environment.
type Config struct {
	config.Common
	config.Limits

	// TimeoutSeconds bounds one run of the step.
	TimeoutSeconds int `env:"TIMEOUT_MUX_SECONDS" envDefault:"900"`
	// MaxSpeedup is the fastest tempo a clip may be played at to fit its
	// slot (1.0..1.5).
	MaxSpeedup float64 `env:"MUX_MAX_SPEEDUP" envDefault:"1.35"`
}

// Validate checks what parsing cannot.
func (c *Config) Validate() error {
	errs := []error{c.Common.Validate(), c.Limits.Validate()}
	if c.TimeoutSeconds < 1 {
		errs = append(errs, fmt.Errorf("TIMEOUT_MUX_SECONDS %d: want at least 1", c.TimeoutSeconds))
	}
	if err := (media.FitOptions{MaxSpeedup: c.MaxSpeedup}).Validate(); err != nil || c.MaxSpeedup == 0 {
		errs = append(errs, fmt.Errorf("MUX_MAX_SPEEDUP %v: want %v..%v", c.MaxSpeedup, media.MinMaxSpeedup, media.MaxMaxSpeedup))
	}
	return errors.Join(errs...)
}

// Timeout is the step's timeout.
func (c *Config) Timeout() time.Duration { return time.Duration(c.TimeoutSeconds) * time.Second }
