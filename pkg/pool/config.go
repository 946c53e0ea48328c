package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/prometheus/client_golang/prometheus"
)

// projectID is what a project's id may be (pkg/tenant's).
var projectID = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// Member is one engine of a pool, as configured.
type Member struct {
	// Name names the engine in the schedule, metrics and console; unique
	// within the pool.
	Name string `json:"name"`
	// Kind is the speech engine (speech.EngineOpenAI, EngineAPy, ...; the
	// embedded ones need no BaseURL).
	Kind    string `json:"kind"`
	BaseURL string `json:"base_url"`
	APIKey  string `json:"api_key"`
	// APIKeyEnv names an environment variable holding the key, so that a
	// pool file need not hold secrets (resolved by Parse's lookup).
	APIKeyEnv string `json:"api_key_env"`
	Model     string `json:"model"`
	// Project, when set, makes the engine a project's own (seed 003's
	// per-user services): only that project's tasks use it, and they use
	// it before the shared engines (those without a project), which they
	// fall back to only when the project allows it (ForProject).
	Project string `json:"project"`
	Limits
	// TimeoutSeconds bounds one request to the engine (0: the step's
	// default, speech.DefaultHTTPTimeout): a hanging engine holds a call no
	// longer, then counts towards its breaker and the call moves on.
	TimeoutSeconds int `json:"timeout_seconds"`
}

// Limits are an engine's weight and limits, as configured and as the
// schedule holds them.
type Limits struct {
	// Weight shares the load: of two free engines the one least used for
	// its weight goes first (default 1).
	Weight int `json:"weight"`
	// RPM, Concurrency and DailyQuota limit the engine; 0 is no limit.
	RPM         int   `json:"rpm"`
	Concurrency int   `json:"concurrency"`
	DailyQuota  int64 `json:"daily_quota"`
	// Fallback engines serve only when no other engine can.
	Fallback bool `json:"fallback"`
}

// Config is a step's pool.
type Config struct {
	// ResetHour is the hour (0-23, in ResetZone) the daily quotas reset.
	ResetHour int `json:"reset_hour"`
	// ResetZone is an IANA time zone name; UTC when empty.
	ResetZone string   `json:"reset_zone"`
	Engines   []Member `json:"engines"`

	loc *time.Location
}

// Parse reads a pool from value: a JSON document (starting with "{") or
// the path of a file holding one. lookup resolves api_key_env (os.Getenv
// in a service). The pool is validated for step's engine kinds.
func Parse(value string, kinds []string, lookup func(string) string) (Config, error) {
	var c Config
	doc := []byte(strings.TrimSpace(value))
	if len(doc) > 0 && doc[0] != '{' {
		b, err := os.ReadFile(string(doc))
		if err != nil {
			return c, fault.Permanent(fmt.Errorf("pool: read %s: %w", doc, err))
		}
		doc = b
	}
	dec := json.NewDecoder(strings.NewReader(string(doc)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, fault.Permanent(fmt.Errorf("pool: decode: %w", err))
	}
	for i := range c.Engines {
		if m := &c.Engines[i]; m.APIKey == "" && m.APIKeyEnv != "" && lookup != nil {
			m.APIKey = lookup(m.APIKeyEnv)
		}
	}
	return c, c.Validate(kinds)
}

// Validate reports every setting that is wrong; kinds are the engine kinds
// of the pool's step, embedded the ones that need no base URL.
func (c *Config) Validate(kinds []string) error {
	var errs []error
	if c.ResetHour < 0 || c.ResetHour > 23 {
		errs = append(errs, fmt.Errorf("reset_hour %d: want 0-23", c.ResetHour))
	}
	c.loc = time.UTC
	if c.ResetZone != "" {
		loc, err := time.LoadLocation(c.ResetZone)
		if err != nil {
			errs = append(errs, fmt.Errorf("reset_zone: %w", err))
		} else {
			c.loc = loc
		}
	}
	if len(c.Engines) == 0 {
		errs = append(errs, errors.New("no engines"))
	}
	seen := map[string]bool{}
	for i := range c.Engines {
		errs = append(errs, c.Engines[i].validate(kinds, seen))
	}
	if err := errors.Join(errs...); err != nil {
		return fault.Permanent(fmt.Errorf("pool: %w", err))
	}
	return nil
}

// validate checks one member and defaults its weight.
func (m *Member) validate(kinds []string, seen map[string]bool) error {
	var errs []error
	if m.Name == "" {
		m.Name = m.Kind
	}
	if seen[m.Name] {
		errs = append(errs, fmt.Errorf("engine %q: name used twice", m.Name))
	}
	seen[m.Name] = true
	known := false
	for _, k := range kinds {
		known = known || k == m.Kind
	}
	if !known {
		errs = append(errs, fmt.Errorf("engine %q: kind %q: want one of %v", m.Name, m.Kind, kinds))
	}
	if m.Project != "" && !projectID.MatchString(m.Project) {
		errs = append(errs, fmt.Errorf("engine %q: project %q: want a project's id (a-z 0-9 _ -)", m.Name, m.Project))
	}
	if m.Weight == 0 {
		m.Weight = 1
	}
	if m.Weight < 0 || m.RPM < 0 || m.Concurrency < 0 || m.DailyQuota < 0 || m.TimeoutSeconds < 0 {
		errs = append(errs, fmt.Errorf("engine %q: weight, rpm, concurrency, daily_quota and timeout_seconds must not be negative", m.Name))
	}
	return errors.Join(errs...)
}

// WindowStart is the start of the quota window now is in: the last reset
// at or before now.
func (c Config) WindowStart(now time.Time) time.Time {
	loc := c.loc
	if loc == nil {
		loc = time.UTC
	}
	l := now.In(loc)
	start := time.Date(l.Year(), l.Month(), l.Day(), c.ResetHour, 0, 0, 0, loc)
	if start.After(l) {
		start = start.AddDate(0, 0, -1)
	}
	return start
}

// Open reads step's pool from value (see Parse; lookup resolves
// api_key_env), writes its members' limits into the shared schedule and
// returns it, counting its metrics on reg (nil: none).
func Open(ctx context.Context, db DB, step, value string, lookup func(string) string, reg prometheus.Registerer) (*Pool, error) {
	cfg, err := Parse(value, Kinds[step], lookup)
	if err != nil {
		return nil, fmt.Errorf("%s pool: %w", step, err)
	}
	p := &Pool{Sched: &Schedule{DB: db, Step: step, Cfg: cfg}, Metrics: NewMetrics(reg)}
	if err := p.Sched.Sync(ctx); err != nil {
		return nil, err
	}
	return p, nil
}
