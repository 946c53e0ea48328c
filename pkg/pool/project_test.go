package pool_test

import (
	"context"
	"testing"

	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/pool"
	"github.com/dubflow/dubflow/pkg/speech"
	"github.com/dubflow/dubflow/pkg/testenv"
)

// TestProjectEnginesFirstThenShared: a project's own engines serve its
// calls first and no other project's; past their quota its calls move to
// the shared engines when the project allows it, else wait; a call without
// a project uses the shared engines only, and a project with no engine of
// its own that may not use the shared ones waits (no_engine).
func TestProjectEnginesFirstThenShared(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	mk := func(name, project string, quota int64) pool.Member {
		return pool.Member{Name: name, Kind: speech.EngineOpenAI, BaseURL: "http://127.0.0.1:9", APIKey: "k", Model: "m",
			Project: project, Limits: pool.Limits{DailyQuota: quota}}
	}
	p := stepPool(t, db.Pool, &clock{}, "translate", mk("acme-own", "acme", 2), mk("shared", "", 0), mk("beta-own", "beta", 1))
	serve := func(ctx context.Context) (string, error) {
		var used string
		err := p.Do(ctx, 1, func(_ context.Context, engine string) error { used = engine; return nil })
		return used, err
	}
	ctx := context.Background()
	for i, want := range []string{"acme-own", "acme-own", "shared"} {
		if got, err := serve(pool.ForProject(ctx, "acme", true)); err != nil || got != want {
			t.Errorf("acme's call %d: %q %v, want %s", i+1, got, err, want)
		}
	}
	if got, err := serve(pool.ForProject(ctx, "beta", false)); err != nil || got != "beta-own" {
		t.Errorf("beta's first call: %q %v, want beta-own", got, err)
	}
	got, err := serve(pool.ForProject(ctx, "beta", false))
	if reason, _, ok := fault.WaitOf(err); !ok || reason != fault.WaitNoQuota || got != "" {
		t.Errorf("beta past its own quota, without the shared engines: %q %v, want a no_quota wait", got, err)
	}
	if got, err := serve(ctx); err != nil || got != "shared" {
		t.Errorf("a call without a project: %q %v, want shared", got, err)
	}
	got, err = serve(pool.ForProject(ctx, "gamma", false))
	if reason, _, ok := fault.WaitOf(err); !ok || reason != fault.WaitNoEngine || got != "" {
		t.Errorf("gamma, no engine of its own and not the shared ones: %q %v, want a no_engine wait", got, err)
	}
}
