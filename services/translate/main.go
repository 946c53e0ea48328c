// Command translate is the machine-translation step of the dubbing chain: it
// translates one batch of a task's segments, and the batch that completes
// the task's translation hands the task to tts.
package main

import (
	"context"

	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/speech"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/pkg/worker"
)

const service = "translate"

func main() { worker.Main(service, run) }

// run serves task.translate with the configuration in environ until ctx is
// cancelled.
func run(ctx context.Context, environ map[string]string) error {
	var cfg Config
	if err := config.Load(environ, &cfg); err != nil {
		return err
	}
	log := worker.NewLogger(service, cfg.Common, nil)
	batcher, err := speech.NewTranslator(cfg.Speech())
	if err != nil {
		return err
	}
	deps, err := worker.Open(ctx, service, cfg.Common, log)
	if err != nil {
		return err
	}
	defer deps.Close()
	log.Info().Str("engine", cfg.Engine).Int("batch_size", cfg.BatchSize).Int("item_max_retries", cfg.ItemMaxRetries).
		Int("max_text_length", cfg.MaxTextLength).Msg("translate starting")
	h := &handler{db: deps.Pool, batcher: *batcher}
	return deps.Serve(ctx, broker.QueueTranslate, []step.Route{{
		Step:    wire.StepTranslate,
		After:   wire.Previous(wire.StepTranslate),
		Timeout: cfg.Timeout(),
		Handler: h,
	}})
}
