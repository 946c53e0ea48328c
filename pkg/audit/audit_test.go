package audit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/audit"
	"github.com/dubflow/dubflow/pkg/testenv"
)

// TestRecordAndListPageByPage: entries are listed newest first, filtered,
// a page at a time through the cursor; a cursor List did not make is
// ErrBadCursor.
func TestRecordAndListPageByPage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.Postgres(t).Pool
	at := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for i, e := range []audit.Entry{
		{Actor: "admin", Role: audit.RoleAdmin, Action: "cancel", Target: "t1", Status: 200},
		{Actor: "ana", Role: audit.RoleDatabase, Action: "retry", Target: "t1", Outcome: "conflict: task t1 is running", Status: 409},
		{Actor: "ana", Role: audit.RoleDatabase, Action: "purge", Status: 200, Detail: map[string]any{"matched": 2}},
	} {
		e.At = at.Add(time.Duration(i) * time.Second)
		if err := audit.Record(ctx, pool, e); err != nil {
			t.Fatal(err)
		}
	}
	p, err := audit.List(ctx, pool, audit.Filter{Limit: 2})
	if err != nil || len(p.Entries) != 2 || p.NextCursor == nil || p.Entries[0].Action != "purge" ||
		p.Entries[0].Detail["matched"] != float64(2) || p.Entries[1].Outcome != "conflict: task t1 is running" {
		t.Fatalf("first page %+v, %v", p, err)
	}
	p, err = audit.List(ctx, pool, audit.Filter{Limit: 2, Cursor: *p.NextCursor})
	if err != nil || len(p.Entries) != 1 || p.NextCursor != nil || p.Entries[0].Outcome != "ok" || p.Entries[0].Action != "cancel" {
		t.Fatalf("second page %+v, %v", p, err)
	}
	if p, err := audit.List(ctx, pool, audit.Filter{Actor: "ana", Target: "t1", Limit: 10}); err != nil ||
		len(p.Entries) != 1 || p.Entries[0].Action != "retry" {
		t.Fatalf("filtered %+v, %v", p, err)
	}
	if _, err := audit.List(ctx, pool, audit.Filter{Limit: 1, Cursor: "bogus"}); !errors.Is(err, audit.ErrBadCursor) {
		t.Fatalf("bad cursor: %v", err)
	}
}
