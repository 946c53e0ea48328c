// Command mux_video is the last step of the dubbing chain: it fits each
// synthesized segment into its slot, assembles the dub track, writes the
// subtitles and muxes the dubbed video, then marks the task done.
package main

import (
	"context"

	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/pkg/worker"
)

const service = "mux_video"

func main() { worker.Main(service, run) }

// run serves task.mux_video with the configuration in environ until ctx is
// cancelled.
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
	log.Info().Float64("max_speedup", cfg.MaxSpeedup).Int("max_video_seconds", cfg.MaxVideoSeconds).
		Int64("max_video_bytes", cfg.MaxVideoBytes).Int64("max_clip_bytes", cfg.MaxClipBytes).Msg("mux_video starting")
	h := &handler{db: deps.Pool, objects: deps.Blob, cfg: cfg}
	return deps.Serve(ctx, broker.QueueMuxVideo, []step.Route{{
		Step:    wire.StepMuxVideo,
		After:   wire.Previous(wire.StepMuxVideo),
		Timeout: cfg.Timeout(),
		Handler: h,
	}})
}
