package setting

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Channel is where every change of a setting is announced (payload: the
// key), by the table's trigger.
const Channel = "dubflow_settings"

// Poll is how often a watch reads the settings again when no change was
// announced: the bound on how late a running service sees a change while
// its LISTEN connection is down.
const Poll = 5 * time.Second

// Watch is a process's view of the settings: the stored values, read at
// Start and again on every change announced on Channel and every Poll;
// where a setting has no row (not seeded, the table not there yet) the
// process's own environment, else the default. Its accessors are safe for
// concurrent use, and on a nil Watch they answer the defaults.
type Watch struct {
	pool    *pgxpool.Pool
	service string
	environ map[string]string
	log     zerolog.Logger
	// Poll overrides the package's Poll (tests).
	Poll time.Duration

	mu       sync.RWMutex
	local    map[string]string // valid values of the process's environment
	stored   map[string]string // valid values of system_config
	seeded   bool
	onChange []func()
	// applied are the values in force once the OnChange functions ran:
	// what dubflow_setting exports.
	applied map[string]string
}

// NewWatch returns the watch of service (whose environment is environ)
// on pool's database; Start reads it.
func NewWatch(pool *pgxpool.Pool, service string, environ map[string]string, log zerolog.Logger) *Watch {
	w := &Watch{pool: pool, service: service, environ: environ, log: log, local: map[string]string{}, stored: map[string]string{}}
	for _, d := range Catalogue {
		if v := environ[d.Env]; v != "" && d.Check(v) == nil {
			w.local[d.Key] = v
		}
	}
	return w
}

// Start seeds the settings the service uses (Seed), logs each whose
// variable differs from the value in force, and reads them all. An
// environment value a setting of the service refuses is an error; a
// database without the table yet (another service migrates it) is not:
// the service runs on its environment and seeds on a later read.
func (w *Watch) Start(ctx context.Context) error {
	for _, d := range UsedBy(w.service) {
		if err := d.CheckEnv(w.environ[d.Env]); err != nil {
			return err
		}
	}
	if err := w.seed(ctx); err != nil {
		return err
	}
	return w.refresh(ctx)
}

// seed seeds the service's settings once; a missing table is logged and
// left for the next read.
func (w *Watch) seed(ctx context.Context) error {
	seeded, err := Seed(ctx, w.pool, w.service, w.environ)
	if missingTable(err) {
		w.log.Warn().Err(err).Msg("settings table not there yet (not migrated); running on the environment until it is")
		return nil
	}
	if err != nil {
		return err
	}
	for _, s := range seeded {
		ev := w.log.Info()
		if s.Differs() {
			ev = w.log.Warn().Str("env", s.Env)
		}
		ev.Str("key", s.Key).Str("value", s.Stored).Bool("seeded", s.Inserted).Str("from", s.From).
			Msg("setting in force")
	}
	w.mu.Lock()
	w.seeded = true
	w.mu.Unlock()
	return nil
}

// missingTable reports whether err says system_config does not exist.
func missingTable(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == "42P01"
}

// refresh reads the stored values and, when one changed, logs it and
// calls the OnChange functions.
func (w *Watch) refresh(ctx context.Context) error {
	w.mu.RLock()
	seeded := w.seeded
	w.mu.RUnlock()
	if !seeded {
		if err := w.seed(ctx); err != nil {
			return err
		}
	}
	list, err := List(ctx, w.pool)
	if missingTable(err) {
		return nil
	}
	if err != nil {
		return err
	}
	now := map[string]string{}
	for _, s := range list {
		if s.UpdatedAt == nil {
			continue
		}
		d, _ := Lookup(s.Key)
		if err := d.Check(s.Value); err != nil {
			w.log.Warn().Err(err).Msg("stored setting refused here; the environment or the default applies")
			continue
		}
		now[s.Key] = s.Value
	}
	w.apply(now)
	return nil
}

// apply makes stored the stored values, logging what changed and calling
// the OnChange functions when anything did.
func (w *Watch) apply(stored map[string]string) {
	w.mu.Lock()
	before := make(map[string]string, len(Catalogue))
	for _, d := range Catalogue {
		before[d.Key] = w.valueLocked(d)
	}
	changed := !maps.Equal(w.stored, stored)
	w.stored = stored
	fns := w.onChange
	w.mu.Unlock()
	if changed {
		for _, d := range Catalogue {
			if now := w.Value(d.Key); now != before[d.Key] {
				w.log.Info().Str("key", d.Key).Str("from", before[d.Key]).Str("to", now).Msg("setting changed")
			}
		}
		for _, fn := range fns {
			fn()
		}
	}
	applied := make(map[string]string, len(Catalogue))
	for _, d := range Catalogue {
		applied[d.Key] = w.Value(d.Key)
	}
	w.mu.Lock()
	w.applied = applied
	w.mu.Unlock()
}

// OnChange adds fn to what runs (on the watch's goroutine) after a read
// found a setting changed. Call it before Run.
func (w *Watch) OnChange(fn func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.onChange = append(w.onChange, fn)
}

// Run reads the settings again on every change announced on Channel and
// every Poll, until ctx ends. A read that fails keeps the values (an
// outage of the database changes no setting). A nil Watch waits for ctx.
func (w *Watch) Run(ctx context.Context) error {
	if w == nil {
		<-ctx.Done()
		return nil
	}
	l := &listener{cfg: w.pool.Config().ConnConfig.Copy()}
	defer l.close()
	for ctx.Err() == nil {
		if !l.listening() {
			if err := l.connect(ctx); err != nil && ctx.Err() == nil {
				w.log.Debug().Err(err).Msg("listen for setting changes; reading every poll meanwhile")
			}
		}
		// Listening before reading: no change falls between the two.
		if err := w.refresh(ctx); err != nil && ctx.Err() == nil {
			w.log.Warn().Err(err).Msg("read settings; keeping the last values")
		}
		l.wait(ctx, w.poll())
	}
	return nil
}

func (w *Watch) poll() time.Duration {
	if w.Poll > 0 {
		return w.Poll
	}
	return Poll
}

// Value returns the setting's value in force: the stored one, else the
// process's environment's, else the default ("" for an unknown key).
func (w *Watch) Value(key string) string {
	d, ok := Lookup(key)
	if !ok {
		return ""
	}
	if w == nil {
		return d.Default
	}
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.valueLocked(d)
}

func (w *Watch) valueLocked(d Def) string {
	if v, ok := w.stored[d.Key]; ok {
		return v
	}
	if v, ok := w.local[d.Key]; ok {
		return v
	}
	return d.Default
}

// Float returns the setting's value in force as a number.
func (w *Watch) Float(key string) float64 {
	v, _ := strconv.ParseFloat(w.Value(key), 64) // checked when read
	return v
}

// Int returns the setting's value in force as an integer.
func (w *Watch) Int(key string) int { return int(w.Float(key)) }

// Seconds returns the setting's value in force, in seconds, as a duration.
func (w *Watch) Seconds(key string) time.Duration {
	return time.Duration(w.Float(key) * float64(time.Second))
}

// settingDesc is dubflow_setting's description.
var settingDesc = prometheus.NewDesc("dubflow_setting",
	"Each run-time setting's value in force in this process (system_config, GET /api/config).", []string{"key"}, nil)

// Collector exports every setting's value in force as dubflow_setting,
// once the OnChange functions applied it, so that each replica shows it
// applied a change.
func (w *Watch) Collector() prometheus.Collector { return collector{w} }

type collector struct{ w *Watch }

func (c collector) Describe(ch chan<- *prometheus.Desc) { ch <- settingDesc }

func (c collector) Collect(ch chan<- prometheus.Metric) {
	c.w.mu.RLock()
	applied := c.w.applied
	c.w.mu.RUnlock()
	for _, d := range Catalogue {
		v, ok := applied[d.Key]
		if !ok {
			v = c.w.Value(d.Key)
		}
		f, _ := strconv.ParseFloat(v, 64)
		ch <- prometheus.MustNewConstMetric(settingDesc, prometheus.GaugeValue, f, d.Key)
	}
}
