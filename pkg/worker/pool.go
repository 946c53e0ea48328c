package worker

import (
	"context"
	"time"

	"github.com/dubflow/dubflow/pkg/pool"
)

// EnginePool opens stepName's pool of engines configured in value (the
// step's ASR_POOL, TRANSLATE_POOL or TTS_POOL; see pkg/pool.Parse): its
// members' limits go into the shared schedule, its metrics on the
// process's registry. api_key_env names are looked up in the environment
// the worker was started with (Run's environ, which its main read).
func (d *Deps) EnginePool(stepName, value string) (*pool.Pool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := pool.Open(ctx, d.Pool, stepName, value, d.getenv, d.Registry)
	if err == nil {
		d.pools = append(d.pools, p)
	}
	return p, err
}

// flushPools writes the releases the pools' last calls left to their next
// batch, so that a stopping worker's engine slots are free at once rather
// than when their reservations expire.
func (d *Deps) flushPools() {
	for _, p := range d.pools {
		p.Sched.Flush()
	}
}

// getenv looks name up in the worker's environment ("" when unset).
func (d *Deps) getenv(name string) string { return d.environ[name] }
