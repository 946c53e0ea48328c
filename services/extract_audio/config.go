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

	// TimeoutSeconds bounds one run of the step.
	TimeoutSeconds int `env:"TIMEOUT_EXTRACT_AUDIO_SECONDS" envDefault:"600"`
	// MaxVideoSeconds rejects longer videos.
	MaxVideoSeconds int `env:"MAX_VIDEO_SECONDS" envDefault:"3600"`
	// MaxVideoBytes rejects larger uploads before they are downloaded.
	MaxVideoBytes int64 `env:"MAX_VIDEO_BYTES" envDefault:"4294967296"`
}

// Validate checks what parsing cannot.
func (c *Config) Validate() error {
	errs := []error{c.Common.Validate()}
	if c.TimeoutSeconds < 1 {
		errs = append(errs, fmt.Errorf("TIMEOUT_EXTRACT_AUDIO_SECONDS %d: want at least 1", c.TimeoutSeconds))
	}
	if c.MaxVideoSeconds < 1 {
		errs = append(errs, fmt.Errorf("MAX_VIDEO_SECONDS %d: want at least 1", c.MaxVideoSeconds))
	}
	if c.MaxVideoBytes < 1 {
		errs = append(errs, fmt.Errorf("MAX_VIDEO_BYTES %d: want at least 1", c.MaxVideoBytes))
	}
	if c.DefaultSourceLanguage == "" || c.DefaultTargetLanguage == "" {
		errs = append(errs, errors.New("DEFAULT_SOURCE_LANGUAGE and DEFAULT_TARGET_LANGUAGE must not be empty"))
	}
	return errors.Join(errs...)
}

// Timeout is the step's timeout.
func (c *Config) Timeout() time.Duration { return time.Duration(c.TimeoutSeconds) * time.Second }

// MaxDuration is the longest video accepted.
func (c *Config) MaxDuration() time.Duration { return time.Duration(c.MaxVideoSeconds) * time.Second }
