package main

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/speech"
)

// Config is tts's configuration, read once from the environment.
type Config struct {
	config.Common

	// TimeoutSeconds bounds one run of the step (the whole task).
	TimeoutSeconds int `env:"TIMEOUT_TTS_SECONDS" envDefault:"1200"`

	// Engine selection (see pkg/speech): espeak (embedded), tts_service
	// (the seed's POST /synthesize) or openai (/v1/audio/speech).
	Engine  string `env:"TTS_ENGINE" envDefault:"espeak"`
	BaseURL string `env:"TTS_BASE_URL"`
	APIKey  string `env:"TTS_API_KEY"`
	Model   string `env:"TTS_MODEL"`
	// Voice is used when the task names no speaker.
	Voice string `env:"TTS_VOICE"`

	// The seed's settings; a message's batch_size, max_concurrency,
	// max_retries and retry_delay_sec override them.
	BatchSize         int     `env:"TTS_BATCH_SIZE" envDefault:"20"`
	MaxConcurrency    int     `env:"TTS_MAX_CONCURRENCY" envDefault:"4"`
	MaxRetries        int     `env:"TTS_MAX_RETRIES" envDefault:"3"`
	RetryDelaySeconds float64 `env:"TTS_RETRY_DELAY_SECONDS" envDefault:"2"`
}

// Validate checks what parsing cannot.
func (c *Config) Validate() error {
	errs := []error{c.Common.Validate(), c.Speech().Validate()}
	if c.TimeoutSeconds < 1 {
		errs = append(errs, fmt.Errorf("TIMEOUT_TTS_SECONDS %d: want at least 1", c.TimeoutSeconds))
	}
	if c.BatchSize < 1 || c.BatchSize > 1000 {
		errs = append(errs, fmt.Errorf("TTS_BATCH_SIZE %d: want 1..1000", c.BatchSize))
	}
	if c.MaxConcurrency < 1 || c.MaxConcurrency > 64 {
		errs = append(errs, fmt.Errorf("TTS_MAX_CONCURRENCY %d: want 1..64", c.MaxConcurrency))
	}
	if c.MaxRetries < 0 || c.MaxRetries > 20 {
		errs = append(errs, fmt.Errorf("TTS_MAX_RETRIES %d: want 0..20", c.MaxRetries))
	}
	if c.RetryDelaySeconds < 0 || c.RetryDelaySeconds > 300 || math.IsNaN(c.RetryDelaySeconds) {
		errs = append(errs, errors.New("TTS_RETRY_DELAY_SECONDS: want 0..300"))
	}
	return errors.Join(errs...)
}

// Timeout is the step's timeout.
func (c *Config) Timeout() time.Duration { return time.Duration(c.TimeoutSeconds) * time.Second }

// Speech maps the synthesis settings onto pkg/speech's configuration.
func (c *Config) Speech() speech.Config {
	return speech.Config{TTSEngine: c.Engine, TTSBaseURL: c.BaseURL, TTSAPIKey: c.APIKey, TTSModel: c.Model, TTSVoice: c.Voice}
}

// Settings are the configured batch, concurrency and retry settings.
func (c *Config) Settings() settings {
	return settings{batchSize: c.BatchSize, concurrency: c.MaxConcurrency, maxRetries: c.MaxRetries,
		retryDelay: time.Duration(c.RetryDelaySeconds * float64(time.Second))}
}
