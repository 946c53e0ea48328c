package main

import (
	"context"
	"errors"
	"time"

	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/pool"
	"github.com/dubflow/dubflow/pkg/setting"
	"github.com/dubflow/dubflow/pkg/speech"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/pkg/worker"
)

// Config is asr's configuration, read once from the environment.
type Config struct {
	config.Common
	config.Limits
	config.MediaTools

	// TimeoutSeconds bounds one run of the step.
	config.TimeoutSeconds `env:"TIMEOUT_ASR_SECONDS" envDefault:"1200"`

	// Engine (see pkg/speech): pocketsphinx (embedded) or openai (an
	// OpenAI-compatible /v1/audio/transcriptions server).
	Engine config.Engine `env:"ASR_ENGINE" envDefault:"pocketsphinx" envPrefix:"ASR_"`
	// EnginePool, read from ASR_POOL, replaces Engine when set.
	config.EnginePool `envPrefix:"ASR_"`
	// ChunkSeconds is the length of the chunks long audio is cut into at
	// silences, each its own asr message; ChunkConcurrency is how many
	// chunks of one task (or project) are in the queue at once, its window:
	// the others wait until earlier ones finish, so that other tasks'
	// messages take turns. WORKER_CONCURRENCY is the messages one process
	// handles at once.
	ChunkSeconds int `env:"ASR_CHUNK_SECONDS" envDefault:"60"`
	// Unset or 0: the cores the worker sees (cores.Usable).
	ChunkConcurrency int `env:"ASR_CONCURRENCY"`
	// ChunkNice (1..19) decodes the chunks of long recordings (at least half
	// ASR_CHUNK_SECONDS) that many steps nicer than the worker itself (at
	// most 19), so that a short task's decode and the other steps on the
	// same cores go first; 0 leaves the priority alone. 5 by default: on a
	// quiet 2-core machine an 11 s clip beside a 10-minute video took 1.12–
	// 1.16× its idle time with 5 against 1.74–1.80× with 0, the video the
	// same or faster.
	ChunkNice int `env:"ASR_CHUNK_NICE" envDefault:"5"`
	// StallSeconds bounds how long a decoder loaded in process may go
	// without progress (no samples consumed, no model loaded, no utterance
	// ended) before the decode is given up and the worker replaced
	// (stallGuard). A model loads in 0.3 CPU-s and 2048 samples decode in
	// about 20 ms, so a minute leaves room for a niced decode on a loaded
	// machine.
	StallSeconds int `env:"ASR_STALL_SECONDS" envDefault:"60"`
	// PocketsphinxSearch is the embedded recogniser's decoder search
	// (pocketsphinx_continuous flags); "default" for the package's own.
	PocketsphinxSearch string `env:"POCKETSPHINX_SEARCH" envDefault:"-fwdflat no -maxhmmpf 6000"`

	// TranslateBatch is how many segments one translate message carries:
	// the first value of the run-time setting translate.batch_size, which
	// the handler reads (pkg/setting).
	config.TranslateBatch
}

// Validate checks what parsing cannot.
func (c *Config) Validate() error {
	return errors.Join(c.Common.Validate(), c.Limits.Validate(), c.TranslateBatch.Validate(), c.Speech().Validate(),
		c.CheckTimeout(service),
		config.Between("ASR_CHUNK_SECONDS", c.ChunkSeconds, 5, 600),
		config.Between("ASR_CONCURRENCY", c.ChunkConcurrency, 0, 64), config.Between("ASR_CHUNK_NICE", c.ChunkNice, 0, 19),
		config.Between("ASR_STALL_SECONDS", c.StallSeconds, 1, 3600),
		speech.CheckPocketsphinxSearch(c.PocketsphinxSearch))
}

// Speech maps the ASR settings onto pkg/speech's configuration.
func (c *Config) Speech() speech.Config {
	return speech.Config{
		ASREngine: c.Engine.Name, ASRBaseURL: c.Engine.BaseURL, ASRAPIKey: c.Engine.APIKey, ASRModel: c.Engine.Model,
		ASRChunkSeconds: c.ChunkSeconds, ASRConcurrency: c.ChunkConcurrency, ASRChunkNice: c.ChunkNice,
		PocketsphinxSearch: c.PocketsphinxSearch, ASRStall: time.Duration(c.StallSeconds) * time.Second,
	}
}

// run serves the asr step with the configuration in environ until ctx is
// cancelled, or until a decode stalls (stallGuard): it then stops as on
// SIGTERM and returns errReplaced, so that the process exits non-zero.
func run(ctx context.Context, environ map[string]string) error {
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	guard := newStallGuard(stop)
	err := worker.Step(service, func(c *Config, d *worker.Deps) (step.Handler, error) {
		return newHandler(c, d, guard)
	})(ctx, environ)
	return errors.Join(err, guard.result())
}

// newHandler builds the step's handler from the configuration, its
// recogniser reporting stalls to guard.
func newHandler(c *Config, d *worker.Deps, guard *stallGuard) (step.Handler, error) {
	if _, err := media.UseZygote(c.FFmpegZygote, d.Log); err != nil {
		return nil, err
	}
	sc := c.Speech()
	sc.OnASRStall = func(err error) {
		d.Log.Error().Err(err).Msg("decode stalled; the worker stops to be replaced")
		guard.stalled(err)
	}
	d.Ready("recognizer", guard.ready)
	engine, err := speech.NewTranscriber(sc)
	if err != nil {
		return nil, err
	}
	if c.Pool != "" {
		p, err := d.EnginePool(wire.StepASR, c.Pool)
		if err != nil {
			return nil, err
		}
		if engine.Engine, err = pool.NewTranscriber(p, sc); err != nil {
			return nil, err
		}
	}
	d.Announce(wire.StepASR, c.Engine.Name, func(ctx context.Context) ([]string, error) { return speech.Capabilities(ctx, engine) })
	d.Log.Info().Str("engine", c.Engine.Name).Int("chunk_seconds", c.ChunkSeconds).Int("chunk_concurrency", c.ChunkConcurrency).
		Int("stall_seconds", c.StallSeconds).Int("translate_batch_size", d.Settings.Int(setting.TranslateBatchSize)).Msg("asr starting")
	return &handler{objects: d.Blob, videos: d.Blob, db: d.Pool, asr: engine,
		batchSize: func() int { return d.Settings.Int(setting.TranslateBatchSize) }, maxAudioBytes: c.MaxAudioBytes,
		maxSeconds: c.MaxVideoSeconds}, nil
}
