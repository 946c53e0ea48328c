package main

import (
	"errors"

	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/worker"
)

// Config is extract_audio's configuration, read once from the environment.
type Config struct {
	config.Common
	config.Limits
	config.MediaTools

	// TimeoutSeconds bounds one run of the step.
	config.TimeoutSeconds `env:"TIMEOUT_EXTRACT_AUDIO_SECONDS" envDefault:"600"`

	// TranslateBatch is how many segments one translate message (or, for
	// subtitles in the target language, one tts part) of a task from
	// subtitles carries.
	config.TranslateBatch
}

// Validate checks what parsing cannot.
func (c *Config) Validate() error {
	errs := []error{c.Common.Validate(), c.Limits.Validate(), c.TranslateBatch.Validate(),
		c.CheckTimeout(service)}
	if c.DefaultSourceLanguage == "" || c.DefaultTargetLanguage == "" {
		errs = append(errs, errors.New("DEFAULT_SOURCE_LANGUAGE and DEFAULT_TARGET_LANGUAGE must not be empty"))
	}
	return errors.Join(errs...)
}

// run serves the extract_audio step with the configuration in environ until ctx is
// cancelled.
var run = worker.Step(service, func(c *Config, d *worker.Deps) (step.Handler, error) {
	if _, err := media.UseZygote(c.FFmpegZygote, d.Log); err != nil {
		return nil, err
	}
	d.Log.Info().Int("max_video_seconds", c.MaxVideoSeconds).Int64("max_video_bytes", c.MaxVideoBytes).
		Str("default_source_language", c.DefaultSourceLanguage).
		Str("default_target_language", c.DefaultTargetLanguage).Msg("extract_audio starting")
	return &handler{objects: d.Blob, db: d.Pool, cfg: *c}, nil
})
