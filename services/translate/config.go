package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/speech"
)

// Config is translate's configuration, read once from the environment.
type Config struct {
	config.Common

	// TimeoutSeconds bounds one run of the step (one batch).
	TimeoutSeconds int `env:"TIMEOUT_TRANSLATE_SECONDS" envDefault:"300"`

	// Engine selection (see pkg/speech): apertium (embedded), openai
	// (chat completions, e.g. Zhipu GLM) or apy (Apertium APy).
	Engine  string `env:"TRANSLATE_ENGINE" envDefault:"apertium"`
	BaseURL string `env:"TRANSLATE_BASE_URL"`
	APIKey  string `env:"TRANSLATE_API_KEY"`
	Model   string `env:"TRANSLATE_MODEL"`

	// BatchSize is the number of texts per engine call (a message's
	// batch_size overrides it).
	BatchSize int `env:"TRANSLATE_BATCH_SIZE" envDefault:"20"`
	// ItemMaxRetries is the number of tries of one text after its batch
	// failed.
	ItemMaxRetries int `env:"TRANSLATE_ITEM_MAX_RETRIES" envDefault:"3"`
	// MaxTextLength splits longer texts (characters); 0 for no limit.
	MaxTextLength int `env:"TRANSLATE_MAX_TEXT_LENGTH" envDefault:"2000"`
}

// Validate checks what parsing cannot.
func (c *Config) Validate() error {
	errs := []error{c.Common.Validate(), c.Speech().Validate()}
	if c.TimeoutSeconds < 1 {
		errs = append(errs, fmt.Errorf("TIMEOUT_TRANSLATE_SECONDS %d: want at least 1", c.TimeoutSeconds))
	}
	if c.BatchSize < 1 || c.BatchSize > 1000 {
		errs = append(errs, fmt.Errorf("TRANSLATE_BATCH_SIZE %d: want 1..1000", c.BatchSize))
	}
	if c.ItemMaxRetries < 1 {
		errs = append(errs, fmt.Errorf("TRANSLATE_ITEM_MAX_RETRIES %d: want at least 1", c.ItemMaxRetries))
	}
	if c.MaxTextLength < 0 {
		errs = append(errs, errors.New("TRANSLATE_MAX_TEXT_LENGTH: want 0 (no limit) or more"))
	}
	return errors.Join(errs...)
}

// Timeout is the step's timeout.
func (c *Config) Timeout() time.Duration { return time.Duration(c.TimeoutSeconds) * time.Second }

// Speech maps the translation settings onto pkg/speech's configuration.
func (c *Config) Speech() speech.Config {
	return speech.Config{
		TranslateEngine: c.Engine, TranslateBaseURL: c.BaseURL, TranslateAPIKey: c.APIKey, TranslateModel: c.Model,
		TranslateBatchSize: c.BatchSize, TranslateItemMaxRetries: c.ItemMaxRetries,
		TranslateMaxTextLength: c.MaxTextLength,
	}
}
