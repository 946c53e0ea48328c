package worker

import (
	"context"

	"github.com/dubflow/dubflow/pkg/engine"
	"github.com/dubflow/dubflow/pkg/ops"
)

// Announce makes the worker tell the doors what its engine can do
// (engine.Announce): languages asks the engine (speech.Capabilities), at
// start and every engine.RefreshInterval while the worker serves. A failure
// is logged and tried again at the next interval; it never stops the
// worker — the doors then judge by the other workers' announcements, or
// not at all. voices, given by tts, asks the engine for its voices
// (speech.Voices), by which the doors judge a task's speaker.
func (d *Deps) Announce(step, engineName string, languages func(ctx context.Context) ([]string, error),
	voices ...func(ctx context.Context) ([]string, error)) {
	worker := WorkerIDs(d.Name, 1)[0]
	log := d.Log.With().Str("step", step).Str("engine", engineName).Logger()
	announce := func(ctx context.Context) {
		c := engine.Capability{Step: step, Worker: worker, Engine: engineName}
		var err error
		c.Languages, err = languages(ctx)
		for _, v := range voices {
			if err == nil {
				c.Voices, err = v(ctx)
			}
		}
		if err == nil {
			err = engine.Announce(ctx, d.Pool, c)
		}
		if err != nil && ctx.Err() == nil {
			log.Warn().Err(err).Msg("announce capabilities")
			return
		}
		log.Debug().Strs("languages", c.Languages).Int("voices", len(c.Voices)).Msg("capabilities announced")
	}
	d.jobs = append(d.jobs, func(ctx context.Context) error {
		announce(ctx)
		ops.Every(ctx, engine.RefreshInterval, announce)
		return nil
	})
}
