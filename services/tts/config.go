package main

import (
	"context"
	"errors"

	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/cores"
	"github.com/dubflow/dubflow/pkg/pool"
	"github.com/dubflow/dubflow/pkg/speaker"
	"github.com/dubflow/dubflow/pkg/speech"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/pkg/worker"
)

// Config is tts's configuration, read once from the environment.
type Config struct {
	config.Common

	// TimeoutSeconds bounds one run of the step (the whole task).
	config.TimeoutSeconds `env:"TIMEOUT_TTS_SECONDS" envDefault:"1200"`

	// Engine (see pkg/speech): espeak (embedded), tts_service (a speech
	// service answering POST /synthesize) or openai (/v1/audio/speech).
	Engine config.Engine `env:"TTS_ENGINE" envDefault:"espeak" envPrefix:"TTS_"`
	// EnginePool, read from TTS_POOL, replaces Engine when set.
	config.EnginePool `envPrefix:"TTS_"`
	// Voice is used when the task names no speaker.
	Voice string `env:"TTS_VOICE"`

	// How segments are synthesized: BatchSize segments per batch,
	// MaxConcurrency at a time, each tried again up to SegmentMaxRetries
	// times RetryDelaySeconds apart (the step's own retries, STEP_MAX_RETRIES,
	// come after those). A message's batch_size, max_concurrency,
	// max_retries and retry_delay_sec override them.
	BatchSize         int     `env:"TTS_BATCH_SIZE" envDefault:"20"`
	MaxConcurrency    int     `env:"TTS_MAX_CONCURRENCY"` // unset or 0: cores.Usable
	SegmentMaxRetries int     `env:"TTS_MAX_RETRIES" envDefault:"3"`
	RetryDelaySeconds float64 `env:"TTS_RETRY_DELAY_SECONDS" envDefault:"2"`
	// MaxRate bounds how much faster than its default rate the engine may
	// speak to fit a line (espeak-ng's words per minute, a remote engine's
	// speed): 1.3 by default, like mux_video's MUX_MAX_SPEEDUP.
	MaxRate float64 `env:"TTS_MAX_RATE" envDefault:"1.3"`
	// MaxRequeues bounds the re-drives of a task's speech synthesis
	// (tts_requeue, the console's requeue) since an operator last retried
	// it: a run after that many that still leaves segments without audio
	// fails the task with the reason, instead of setting it compensating
	// again.
	MaxRequeues int `env:"TTS_MAX_REQUEUES" envDefault:"3"`

	// A voice per speaker: up to MaxSpeakers speakers are told apart (1:
	// one voice for all), each given a voice of its register from
	// VoicesLow/VoicesHigh ("{lang}" becomes the target language); empty
	// lists take espeak-ng's variants for the espeak engine, and the
	// task's voice for every speaker otherwise.
	MaxSpeakers int      `env:"TTS_MAX_SPEAKERS" envDefault:"4"`
	VoicesLow   []string `env:"TTS_VOICES_LOW"`
	VoicesHigh  []string `env:"TTS_VOICES_HIGH"`
}

// Voicing is the voice-per-speaker setting.
func (c *Config) Voicing() voicing {
	v := voicing{maxSpeakers: c.MaxSpeakers, voices: speaker.Voices{Low: c.VoicesLow, High: c.VoicesHigh}}
	if len(v.voices.Low)+len(v.voices.High) == 0 && c.Engine.Name == "espeak" {
		v.voices = speaker.EspeakVoices
	}
	return v
}

// Validate checks what parsing cannot.
func (c *Config) Validate() error {
	errs := []error{c.Common.Validate(), c.Speech().Validate(),
		c.CheckTimeout(service),
		config.Between("TTS_BATCH_SIZE", c.BatchSize, 1, 1000),
		config.Between("TTS_MAX_CONCURRENCY", c.MaxConcurrency, 0, 64),
		config.Between("TTS_MAX_SPEAKERS", c.MaxSpeakers, 1, 8),
		config.Between("TTS_MAX_RETRIES", c.SegmentMaxRetries, 0, 20),
		config.BetweenFloat("TTS_RETRY_DELAY_SECONDS", c.RetryDelaySeconds, 0, 300),
		config.BetweenFloat("TTS_MAX_RATE", c.MaxRate, 1, 2),
		config.Between("TTS_MAX_REQUEUES", c.MaxRequeues, 0, 100)}
	return errors.Join(errs...)
}

// Speech maps the synthesis settings onto pkg/speech's configuration.
func (c *Config) Speech() speech.Config {
	return speech.Config{TTSEngine: c.Engine.Name, TTSBaseURL: c.Engine.BaseURL, TTSAPIKey: c.Engine.APIKey,
		TTSModel: c.Engine.Model, TTSVoice: c.Voice}
}

// Settings are the configured batch, concurrency and retry settings.
func (c *Config) Settings() settings {
	s := settings{batchSize: c.BatchSize, concurrency: c.MaxConcurrency, maxRetries: c.SegmentMaxRetries,
		retryDelay: config.Seconds(c.RetryDelaySeconds), maxRate: c.MaxRate, maxRequeues: c.MaxRequeues}
	if s.concurrency <= 0 { // TTS_MAX_CONCURRENCY unset: the cores the worker sees
		s.concurrency = cores.Usable()
	}
	return s
}

// run serves the tts step with the configuration in environ until ctx is
// cancelled.
var run = worker.Step(service, func(c *Config, d *worker.Deps) (step.Handler, error) {
	engine, err := speech.NewSynthesizer(c.Speech())
	if err != nil {
		return nil, err
	}
	if c.Pool != "" {
		p, err := d.EnginePool(wire.StepTTS, c.Pool)
		if err != nil {
			return nil, err
		}
		if engine, err = pool.NewSynthesizer(p, c.Speech()); err != nil {
			return nil, err
		}
	}
	d.Announce(wire.StepTTS, c.Engine.Name, func(ctx context.Context) ([]string, error) { return speech.Capabilities(ctx, engine) },
		func(ctx context.Context) ([]string, error) { return speech.Voices(ctx, engine) })
	d.Log.Info().Str("engine", c.Engine.Name).Int("batch_size", c.BatchSize).Int("max_concurrency", c.MaxConcurrency).
		Int("segment_max_retries", c.SegmentMaxRetries).Float64("retry_delay_seconds", c.RetryDelaySeconds).Msg("tts starting")
	return &handler{db: d.Pool, objects: d.Blob, tts: engine, defaults: c.Settings(), voicing: c.Voicing(),
		voices: &voiceList{engine: engine}}, nil
})
