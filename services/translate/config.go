package main

import (
	"context"
	"errors"

	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/pool"
	"github.com/dubflow/dubflow/pkg/setting"
	"github.com/dubflow/dubflow/pkg/speech"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/pkg/worker"
)

// Config is translate's configuration, read once from the environment.
type Config struct {
	config.Common

	// TimeoutSeconds bounds one run of the step (one batch).
	config.TimeoutSeconds `env:"TIMEOUT_TRANSLATE_SECONDS" envDefault:"300"`

	// Engine (see pkg/speech): apertium (embedded), openai (chat
	// completions, e.g. Zhipu GLM) or apy (Apertium APy).
	Engine config.Engine `env:"TRANSLATE_ENGINE" envDefault:"apertium" envPrefix:"TRANSLATE_"`
	// EnginePool, read from TRANSLATE_POOL, replaces Engine when set.
	config.EnginePool `envPrefix:"TRANSLATE_"`

	// TranslateBatch is the number of texts per engine call (a message's
	// batch_size overrides it): the first value of the run-time setting
	// translate.batch_size, which the handler reads (pkg/setting).
	config.TranslateBatch
	// ItemMaxRetries is the number of tries of one text after its batch
	// failed.
	ItemMaxRetries int `env:"TRANSLATE_ITEM_MAX_RETRIES" envDefault:"3"`
	// MaxTextLength splits longer texts (characters); 0 for no limit.
	MaxTextLength int `env:"TRANSLATE_MAX_TEXT_LENGTH" envDefault:"2000"`
	// ApertiumPipelines bounds the long-lived Apertium pipelines the
	// embedded engine keeps per language pair (each about 180 MB
	// resident), as many batches translating at once: 0 for the default
	// (1), -1 to keep none and run one `apertium` process per call.
	ApertiumPipelines int `env:"APERTIUM_PIPELINES" envDefault:"0"`
}

// Validate checks what parsing cannot.
func (c *Config) Validate() error {
	errs := []error{c.Common.Validate(), c.TranslateBatch.Validate(), c.Speech().Validate(),
		c.CheckTimeout(service),
		config.AtLeast("TRANSLATE_ITEM_MAX_RETRIES", c.ItemMaxRetries, 1),
		config.AtLeast("APERTIUM_PIPELINES", c.ApertiumPipelines, -1)}
	if c.MaxTextLength < 0 {
		errs = append(errs, errors.New("TRANSLATE_MAX_TEXT_LENGTH: want 0 (no limit) or more"))
	}
	return errors.Join(errs...)
}

// Speech maps the translation settings onto pkg/speech's configuration.
func (c *Config) Speech() speech.Config {
	return speech.Config{
		TranslateEngine: c.Engine.Name, TranslateBaseURL: c.Engine.BaseURL, TranslateAPIKey: c.Engine.APIKey,
		TranslateModel:     c.Engine.Model,
		TranslateBatchSize: c.TranslateBatchSize, TranslateItemMaxRetries: c.ItemMaxRetries,
		TranslateMaxTextLength: c.MaxTextLength,
	}
}

// translator builds the configured engine inside its Batcher.
func (c *Config) translator() (*speech.Batcher, error) {
	batcher, err := speech.NewTranslator(c.Speech())
	if err != nil {
		return nil, err
	}
	if a, ok := batcher.Engine.(*speech.Apertium); ok {
		a.Pipelines = c.ApertiumPipelines
	}
	return batcher, nil
}

// pooled puts the configured pool's engines, if any, in the batcher.
func (c *Config) pooled(d *worker.Deps, batcher *speech.Batcher) error {
	if c.Pool == "" {
		return nil
	}
	p, err := d.EnginePool(wire.StepTranslate, c.Pool)
	if err != nil {
		return err
	}
	tr, err := pool.NewTranslator(p, c.Speech())
	if err != nil {
		return err
	}
	for _, e := range tr.Engines {
		if a, ok := e.(*speech.Apertium); ok {
			a.Pipelines = c.ApertiumPipelines
		}
	}
	batcher.Engine = tr
	return nil
}

// run serves the translate step with the configuration in environ until ctx is
// cancelled.
var run = worker.Step(service, func(c *Config, d *worker.Deps) (step.Handler, error) {
	batcher, err := c.translator()
	if err != nil {
		return nil, err
	}
	if err := c.pooled(d, batcher); err != nil {
		return nil, err
	}
	d.Announce(wire.StepTranslate, c.Engine.Name, func(ctx context.Context) ([]string, error) { return speech.Capabilities(ctx, batcher) })
	d.Log.Info().Str("engine", c.Engine.Name).Int("batch_size", d.Settings.Int(setting.TranslateBatchSize)).
		Int("item_max_retries", c.ItemMaxRetries).Int("max_text_length", c.MaxTextLength).
		Int("apertium_pipelines", c.ApertiumPipelines).Msg("translate starting")
	return &handler{db: d.Pool, batcher: *batcher, batchSize: func() int { return d.Settings.Int(setting.TranslateBatchSize) }}, nil
})
