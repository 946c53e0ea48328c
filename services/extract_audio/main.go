// Command extract_audio is the first step of the dubbing chain: it checks the
// uploaded video with ffprobe, extracts its speech track as mono 16 kHz PCM
// WAV with ffmpeg, stores it and hands the task to asr.
package main

import (
	"context"

	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/pkg/worker"
)

const service = "extract_audio"

func main() { worker.Main(service, run) }

// run serves task.extract_audio with the configuration in environ until ctx
// is cancelled.
func run(ctx context.Context, environ map[string]string) error {
	var cfg Config
	if err := config.Load(environ, &cfg); err != nil {
		return err
	}
	log := worker.NewLogger(service, cfg.Common, nil)
	deps, err := worker.Open(ctx, service, cfg.Common, log)
	if err != nil {
		return err
	}
	defer deps.Close()
	log.Info().Int("max_video_seconds", cfg.MaxVideoSeconds).Int64("max_video_bytes", cfg.MaxVideoBytes).
		Str("default_source_language", cfg.DefaultSourceLanguage).
		Str("default_target_language", cfg.DefaultTargetLanguage).Msg("extract_audio starting")
	h := &handler{objects: deps.Blob, db: deps.Pool, cfg: cfg}
	return deps.Serve(ctx, broker.QueueExtractAudio, []step.Route{{
		Step:    wire.StepExtractAudio,
		After:   wire.Previous(wire.StepExtractAudio),
		Timeout: cfg.Timeout(),
		Handler: h,
	}})
}
