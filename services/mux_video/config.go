package main

import (
	"errors"
	"fmt"
	"math"

	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/pkg/worker"
)

// Config is mux_video's configuration, read once from the environment.
type Config struct {
	config.Common
	config.Limits
	config.MediaTools

	// TimeoutSeconds bounds one run of the step.
	config.TimeoutSeconds `env:"TIMEOUT_MUX_SECONDS" envDefault:"900"`
	// MaxSpeedup is the largest speed-up (synthesis rate times stretch) a
	// line gets to fit its slot, then with borrowed silence (1.0..1.5);
	// RescueSpeedup the largest for a line that fits no other way, before
	// it is cut (MUX_MAX_SPEEDUP..2.0).
	MaxSpeedup    float64 `env:"MUX_MAX_SPEEDUP" envDefault:"1.3"`
	RescueSpeedup float64 `env:"MUX_RESCUE_SPEEDUP" envDefault:"1.5"`

	// The dub's sound and subtitles; a task's mux_video options override
	// them (see media.MixOptions).
	BackgroundMode   string  `env:"BACKGROUND_MODE" envDefault:"duck"`
	BackgroundDuckDB float64 `env:"BACKGROUND_DUCK_DB" envDefault:"-18"`
	LoudnessLUFS     float64 `env:"LOUDNESS_LUFS" envDefault:"-16"`
	BurnSubtitles    bool    `env:"BURN_SUBTITLES" envDefault:"false"`
}

// Validate checks what parsing cannot.
func (c *Config) Validate() error {
	errs := []error{c.Common.Validate(), c.Limits.Validate(), c.CheckTimeout(service)}
	if err := (media.FitOptions{MaxSpeedup: c.MaxSpeedup}).Validate(); err != nil || c.MaxSpeedup == 0 {
		errs = append(errs, fmt.Errorf("MUX_MAX_SPEEDUP %v: want %v..%v", c.MaxSpeedup, media.MinMaxSpeedup, media.MaxMaxSpeedup))
	}
	if c.RescueSpeedup < c.MaxSpeedup || c.RescueSpeedup > media.MaxRescueSpeedup || math.IsNaN(c.RescueSpeedup) {
		errs = append(errs, fmt.Errorf("MUX_RESCUE_SPEEDUP %v: want MUX_MAX_SPEEDUP..%v", c.RescueSpeedup, media.MaxRescueSpeedup))
	}
	if err := c.Mix().Validate(); err != nil {
		errs = append(errs, fmt.Errorf("BACKGROUND_MODE, BACKGROUND_DUCK_DB, LOUDNESS_LUFS: %w", err))
	}
	return errors.Join(errs...)
}

// Mix is the configured mix, before a task's options.
func (c *Config) Mix() media.MixOptions {
	return media.MixOptions{Background: c.BackgroundMode, DuckDB: c.BackgroundDuckDB, LoudnessLUFS: c.LoudnessLUFS}
}

// run serves the mux_video step with the configuration in environ until ctx is
// cancelled.
var run = worker.Step(service, func(c *Config, d *worker.Deps) (step.Handler, error) {
	if _, err := media.UseZygote(c.FFmpegZygote, d.Log); err != nil {
		return nil, err
	}
	d.Log.Info().Float64("max_speedup", c.MaxSpeedup).Int("max_video_seconds", c.MaxVideoSeconds).
		Int64("max_video_bytes", c.MaxVideoBytes).Int64("max_clip_bytes", c.MaxClipBytes).Msg("mux_video starting")
	// Beside the step: the stored stream of a task that failed or was
	// cancelled ends (stream_end.go).
	d.Consume(wire.QueueStreamEnd, (&streamEnd{db: d.Pool, objects: d.Blob, log: d.Log}).handle)
	return &handler{db: d.Pool, objects: d.Blob, cfg: *c, kept: sources{maxBytes: c.MaxVideoBytes}}, nil
})
