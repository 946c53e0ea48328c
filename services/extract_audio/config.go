package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/config"
)

// Config is extract_audio's configuration, read once from the environment.
type Config struct {
	config.Common
	config.Limits

	// TimeoutSeconds bounds one run of the step.
	TimeoutSeconds int `env:"TIMEOUT_EXTRACT_AUDIO_SECONDS" envDefault:"600"`
}

// Validate checks what parsing cannot.
func (c *Config) Validate() error {
	errs := []error{c.Common.Validate(), c.Limits.Validate()}
	if c.TimeoutSeconds < 1 {
		errs = append(errs, fmt.Errorf("TIMEOUT_EXTRACT_AUDIO_SECONDS %d: want at least 1", c.TimeoutSeconds))
	}
	if c.DefaultSourceLanguage == "" || c.DefaultTargetLanguage == "" {
		errs = append(errs, errors.New("DEFAULT_SOURCE_LANGUAGE and DEFAULT_TARGET_LANGUAGE must not be empty"))
	}
	return errors.Join(errs...)
}

// Timeout is the step's timeout.
func (c *Config) Timeout() time.Duration { return time.Duration(c.TimeoutSeconds) * time.Second }
