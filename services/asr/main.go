// Command asr is the speech-recognition step of the dubbing chain: it
// transcribes the extracted audio with timestamps, stores the transcript,
// writes the task's segments and fans them out to translate in batches.
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

const service = "asr"

func main() { worker.Main(service, run) }

// run serves task.asr with the configuration in environ until ctx is
// cancelled.
func run(ctx context.Context, environ map[string]string) error {
	var cfg Config
	if err := config.Load(environ, &cfg); err != nil {
		return err
	}
	log := worker.NewLogger(service, cfg.Common, nil)
	engine, err := speech.NewTranscriber(cfg.Speech())
	if err != nil {
		return err
	}
	deps, err := worker.Open(ctx, service, cfg.Common, log)
	if err != nil {
		return err
	}
	defer deps.Close()
	log.Info().Str("engine", cfg.Engine).Int("chunk_seconds", cfg.ChunkSeconds).Int("concurrency", cfg.Concurrency).
		Int("translate_batch_size", cfg.TranslateBatchSize).Msg("asr starting")
	h := &handler{objects: deps.Blob, db: deps.Pool, asr: engine,
		batchSize: cfg.TranslateBatchSize, maxAudioBytes: cfg.MaxAudioBytes, maxSeconds: cfg.MaxVideoSeconds}
	return deps.Serve(ctx, broker.QueueASR, []step.Route{{
		Step:    wire.StepASR,
		After:   wire.Previous(wire.StepASR),
		Timeout: cfg.Timeout(),
		Handler: h,
	}})
}
