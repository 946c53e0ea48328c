package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/speech"
)

// Config is asr's configuration, read once from the environment.
type Config struct {
	config.Common
	config.Limits

	// TimeoutSeconds bounds one run of the step.
	TimeoutSeconds int `env:"TIMEOUT_ASR_SECONDS" envDefault:"1200"`

	// Engine selection (see pkg/speech): pocketsphinx (embedded) or openai
	// (an OpenAI-compatible /v1/audio/transcriptions server).
	Engine  string `env:"ASR_ENGINE" envDefault:"pocketsphinx"`
	BaseURL string `env:"ASR_BASE_URL"`
	APIKey  string `env:"ASR_API_KEY"`
	Model   string `env:"ASR_MODEL"`
	// ChunkSeconds and Concurrency drive the Chunker that splits long
	// audio at silences.
	ChunkSeconds int `env:"ASR_CHUNK_SECONDS" envDefault:"30"`
	Concurrency  int `env:"ASR_CONCURRENCY" envDefault:"2"`

	// TranslateBatchSize is how many segments one translate message carries.
	TranslateBatchSize int `env:"TRANSLATE_BATCH_SIZE" envDefault:"20"`
}

// Validate checks what parsing cannot.
func (c *Config) Validate() error {
	errs := []error{c.Common.Validate(), c.Limits.Validate(), c.Speech().Validate()}
	if c.TimeoutSeconds < 1 {
		errs = append(errs, fmt.Errorf("TIMEOUT_ASR_SECONDS %d: want at least 1", c.TimeoutSeconds))
	}
	if c.ChunkSeconds < 5 {
		errs = append(errs, fmt.Errorf("ASR_CHUNK_SECONDS %d: want at least 5", c.ChunkSeconds))
	}
	if c.Concurrency < 1 || c.Concurrency > 64 {
		errs = append(errs, fmt.Errorf("ASR_CONCURRENCY %d: want 1..64", c.Concurrency))
	}
	if c.TranslateBatchSize < 1 || c.TranslateBatchSize > 1000 {
		errs = append(errs, fmt.Errorf("TRANSLATE_BATCH_SIZE %d: want 1..1000", c.TranslateBatchSize))
	}
	return errors.Join(errs...)
}

// Timeout is the step's timeout.
func (c *Config) Timeout() time.Duration { return time.Duration(c.TimeoutSeconds) * time.Second }

// Speech maps the ASR settings onto pkg/speech's configuration.
func (c *Config) Speech() speech.Config {
	return speech.Config{
		ASREngine: c.Engine, ASRBaseURL: c.BaseURL, ASRAPIKey: c.APIKey, ASRModel: c.Model,
		ASRChunkSeconds: c.ChunkSeconds, ASRConcurrency: c.Concurrency,
	}
}
