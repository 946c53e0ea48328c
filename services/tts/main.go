// Command tts is the speech-synthesis step of the dubbing chain: it speaks
// every translated segment, fitted to its slot, stores each clip as soon as
// it exists, and hands the task to mux_video — or, when a segment still
// fails after its retries, sends it to the compensation queue and parks the
// task for an operator.
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

const service = "tts"

func main() { worker.Main(service, run) }

// run serves task.tts with the configuration in environ until ctx is
// cancelled.
func run(ctx context.Context, environ map[string]string) error {
	var cfg Config
	if err := config.Load(environ, &cfg); err != nil {
		return err
	}
	log := worker.NewLogger(service, cfg.Common, nil)
	engine, err := speech.NewSynthesizer(cfg.Speech())
	if err != nil {
		return err
	}
	deps, err := worker.Open(ctx, service, cfg.Common, log)
	if err != nil {
		return err
	}
	defer deps.Close()
	log.Info().Str("engine", cfg.Engine).Int("batch_size", cfg.BatchSize).Int("max_concurrency", cfg.MaxConcurrency).
		Int("max_retries", cfg.MaxRetries).Float64("retry_delay_seconds", cfg.RetryDelaySeconds).Msg("tts starting")
	h := &handler{db: deps.Pool, objects: deps.Blob, tts: engine, defaults: cfg.Settings()}
	return deps.Serve(ctx, broker.QueueTTS, []step.Route{{
		Step:    wire.StepTTS,
		After:   wire.Previous(wire.StepTTS),
		Timeout: cfg.Timeout(),
		Handler: h,
	}})
}
