package tenant_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/tenant"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/google/uuid"
)

// TestProjectsAndTokens: a project is created once, with its checks; a
// token's secret is made once and only its digest kept; a live token is
// found by its secret or id, a revoked or expired one is not; a project's
// admin revokes only its project's tokens.
func TestProjectsAndTokens(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	if _, err := tenant.CreateProject(ctx, db.Pool, tenant.NewProject{ID: "Bad Id"}, "t"); !errors.Is(err, tenant.ErrInvalid) {
		t.Errorf("a bad id: %v, want ErrInvalid", err)
	}
	p, err := tenant.CreateProject(ctx, db.Pool, tenant.NewProject{ID: "acme"}, "t")
	if err != nil || p.Name != "acme" || !p.SharedEngines || p.FairScope != tenant.ScopeProject || p.DailySharedMinutes != nil {
		t.Fatalf("acme: %+v %v", p, err)
	}
	if _, err := tenant.CreateProject(ctx, db.Pool, tenant.NewProject{ID: "acme"}, "t"); !errors.Is(err, tenant.ErrExists) {
		t.Errorf("acme again: %v, want ErrExists", err)
	}
	list, err := tenant.ListProjects(ctx, db.Pool, "")
	if err != nil || len(list) != 2 || list[0].ID != "acme" || list[1].ID != tenant.Default {
		t.Errorf("projects: %+v %v, want acme and the default", list, err)
	}
	now := time.Now()
	if _, err := tenant.CreateToken(ctx, db.Pool, tenant.NewToken{Project: "nope", Name: "x", Role: "read"}, "t", now); !errors.Is(err, tenant.ErrNotFound) {
		t.Errorf("a token of no project: %v, want ErrNotFound", err)
	}
	soon := now.Add(time.Hour)
	c, err := tenant.CreateToken(ctx, db.Pool, tenant.NewToken{Project: "acme", Name: "ci", Role: "operator", ExpiresAt: &soon}, "t", now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tenant.CreateToken(ctx, db.Pool, tenant.NewToken{Project: "acme", Name: "ci", Role: "read"}, "t", now); !errors.Is(err, tenant.ErrExists) {
		t.Errorf("a second live token named ci: %v, want ErrExists", err)
	}
	if got, ok, err := tenant.Lookup(ctx, db.Pool, c.Secret); err != nil || !ok || got.ID != c.ID || got.Role != "operator" {
		t.Errorf("lookup by secret: %+v %v %v", got, ok, err)
	}
	if _, ok, _ := tenant.Lookup(ctx, db.Pool, c.Secret+"x"); ok {
		t.Error("a wrong secret was found")
	}
	if _, err := tenant.RevokeToken(ctx, db.Pool, c.ID, tenant.Default, "t"); !errors.Is(err, tenant.ErrNotFound) {
		t.Errorf("revoked as another project's: %v, want ErrNotFound", err)
	}
	if r, err := tenant.RevokeToken(ctx, db.Pool, c.ID, "acme", "t"); err != nil || r.RevokedAt == nil {
		t.Fatalf("revoke: %+v %v", r, err)
	}
	if _, ok, _ := tenant.LookupID(ctx, db.Pool, c.ID); ok {
		t.Error("a revoked token is live")
	}
	e, err := tenant.CreateToken(ctx, db.Pool, tenant.NewToken{Project: "acme", Name: "ci", Role: "read", ExpiresAt: &soon}, "t", now)
	if err != nil {
		t.Fatalf("the name of a revoked token again: %v", err)
	}
	if _, err := db.Pool.Exec(ctx, `UPDATE api_tokens SET expires_at = now() - interval '1 second' WHERE id = $1`, e.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := tenant.Lookup(ctx, db.Pool, e.Secret); ok {
		t.Error("an expired token is live")
	}
}

// TestChargeShared: a task is charged its seconds once; past the daily
// limit a task waits with reason project_quota until the next UTC day and
// is not charged; a project on its own engines only, or without a limit,
// is never refused.
func TestChargeShared(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	ten := 10
	if _, err := tenant.CreateProject(ctx, db.Pool, tenant.NewProject{ID: "tight", DailySharedMinutes: &ten}, "t"); err != nil {
		t.Fatal(err)
	}
	no := false
	if _, err := tenant.CreateProject(ctx, db.Pool, tenant.NewProject{ID: "own", DailySharedMinutes: &ten, SharedEngines: &no}, "t"); err != nil {
		t.Fatal(err)
	}
	task := func(project string) uuid.UUID {
		id := uuid.New()
		if _, err := db.Pool.Exec(ctx, `INSERT INTO tasks (id, status, project) VALUES ($1, 'running', $2)`, id, project); err != nil {
			t.Fatal(err)
		}
		return id
	}
	now := time.Date(2026, 3, 4, 22, 0, 0, 0, time.UTC)
	first := task("tight")
	for range 2 { // charged once
		if err := tenant.ChargeShared(ctx, db.Pool, first, 400, now); err != nil {
			t.Fatal(err)
		}
	}
	second := task("tight")
	err := tenant.ChargeShared(ctx, db.Pool, second, 300, now)
	reason, until, ok := fault.WaitOf(err)
	if !ok || reason != fault.WaitProjectQuota || !until.Equal(time.Date(2026, 3, 5, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("past the limit: %v (%q until %v), want project_quota until the next UTC day", err, reason, until)
	}
	if u, err := tenant.UsageOf(ctx, db.Pool, "tight", now); err != nil || u.SharedMinutes != 400.0/60 || *u.LimitMinutes != 10 {
		t.Errorf("usage: %+v %v, want 6.67 of 10 minutes", u, err)
	}
	if err := tenant.ChargeShared(ctx, db.Pool, second, 300, now.Add(3*time.Hour)); err != nil {
		t.Errorf("the next day: %v", err)
	}
	if err := tenant.ChargeShared(ctx, db.Pool, task("own"), 10000, now); err != nil {
		t.Errorf("a project on its own engines: %v", err)
	}
	if err := tenant.ChargeShared(ctx, db.Pool, task(tenant.Default), 10000, now); err != nil {
		t.Errorf("the default project (no limit): %v", err)
	}
}

// TestChargeSharedRace: tasks charging at once never both take the last
// minutes (the project's row is locked for the charge): of eight tasks of
// 100 s against a 10-minute limit, six are charged and two wait.
func TestChargeSharedRace(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	ten := 10
	if _, err := tenant.CreateProject(ctx, db.Pool, tenant.NewProject{ID: "race", DailySharedMinutes: &ten}, "t"); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)
	errs := make(chan error, 8)
	for range 8 {
		id := uuid.New()
		if _, err := db.Pool.Exec(ctx, `INSERT INTO tasks (id, status, project) VALUES ($1, 'running', 'race')`, id); err != nil {
			t.Fatal(err)
		}
		go func() { errs <- tenant.ChargeShared(ctx, db.Pool, id, 100, now) }()
	}
	charged, waiting := 0, 0
	for range 8 {
		err := <-errs
		if reason, _, ok := fault.WaitOf(err); ok && reason == fault.WaitProjectQuota {
			waiting++
		} else if err == nil {
			charged++
		} else {
			t.Errorf("charge: %v", err)
		}
	}
	u, err := tenant.UsageOf(ctx, db.Pool, "race", now)
	if charged != 6 || waiting != 2 || err != nil || u.SharedMinutes != 10 {
		t.Fatalf("%d charged, %d waiting, %.2f minutes used (%v); want 6, 2 and 10", charged, waiting, u.SharedMinutes, err)
	}
}

// TestCrowded: a project that takes its turns as a project is crowded past
// the bound of queued or running tasks; the default project (each task its
// own turn) never is.
func TestCrowded(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	if _, err := tenant.CreateProject(ctx, db.Pool, tenant.NewProject{ID: "busy"}, "t"); err != nil {
		t.Fatal(err)
	}
	var last, def uuid.UUID
	for i := range 3 {
		last, def = uuid.New(), uuid.New()
		if _, err := db.Pool.Exec(ctx, `INSERT INTO tasks (id, status, project) VALUES ($1, 'running', 'busy'), ($2, 'queued', 'default')`,
			last, def); err != nil {
			t.Fatal(err)
		}
		crowded, err := tenant.Crowded(ctx, db.Pool, last, 2)
		if err != nil || crowded != (i == 2) {
			t.Errorf("%d tasks of busy: crowded %v (%v), want %v", i+1, crowded, err, i == 2)
		}
	}
	if crowded, err := tenant.Crowded(ctx, db.Pool, def, 2); err != nil || crowded {
		t.Errorf("the default project: crowded %v (%v), want never", crowded, err)
	}
}
