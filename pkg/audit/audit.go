// Package audit is the operators' audit log (the console_audit table):
// who (a token's or a person's name, and the role they act in) did what
// (an action: submit, cancel, retry, redub, replay, purge, pause, resume,
// requeue, login, logout) to what (a task id, a dead letter id, a step),
// when, and how it ended. Every door that acts for an operator writes it
// here — the console's API for each audited route, dubctl in database mode
// for each command that changes something — so that the log, and the
// operator events a task's timeline derives from it (pkg/view), read the
// same whichever door was used.
package audit

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/store"
	"github.com/jackc/pgx/v5"
)

// Roles an entry's actor acts in: a console token's (admin, read) or
// dubctl's database mode (Database: the workers' credentials, the actor
// the operating-system user or dubctl's --as).
const (
	RoleAdmin    = "admin"
	RoleRead     = "read"
	RoleDatabase = "database"
)

// Entry is one row of console_audit, in the API's JSON (GET /api/audit).
type Entry struct {
	ID     int64     `json:"id"`
	At     time.Time `json:"at"`
	Actor  string    `json:"actor"`
	Role   string    `json:"role"`
	Action string    `json:"action"`
	Target string    `json:"target"`
	// Outcome is "ok", or the error's code and message as answered
	// ("conflict: task … is done; …").
	Outcome string `json:"outcome"`
	// Status is the HTTP status answered (dubctl's database mode writes
	// the status the console answers for the same outcome).
	Status int            `json:"status"`
	Detail map[string]any `json:"detail"`
}

// Record writes e (At: now when zero; Outcome: "ok" when empty). The
// caller decides what a failure means; the console logs it and answers
// the request it records anyway: the action happened.
func Record(ctx context.Context, db store.Querier, e Entry) error {
	if e.At.IsZero() {
		e.At = time.Now()
	}
	if e.Outcome == "" {
		e.Outcome = "ok"
	}
	detail := []byte("{}")
	if e.Detail != nil {
		var err error
		if detail, err = json.Marshal(e.Detail); err != nil {
			return fmt.Errorf("record audit %s %s: %w", e.Action, e.Target, err)
		}
	}
	_, err := db.Exec(ctx, `INSERT INTO console_audit (at, actor, role, action, target, outcome, status, detail)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, e.At, e.Actor, e.Role, e.Action, e.Target, e.Outcome, e.Status, detail)
	if err != nil {
		return fmt.Errorf("record audit %s %s: %w", e.Action, e.Target, err)
	}
	return nil
}

// Filter selects entries for List; a zero field selects all.
type Filter struct {
	Action, Actor, Target string
	Since, Until          *time.Time
	// Cursor is a Page's NextCursor: the entries after it.
	Cursor string
	// Limit bounds the page (at least 1).
	Limit int
}

// Page is one page of entries, newest first (GET /api/audit).
type Page struct {
	Entries    []Entry `json:"entries"`
	NextCursor *string `json:"nextCursor"`
}

// ErrBadCursor is returned by List for a cursor it did not make.
var ErrBadCursor = errors.New("cursor: not a cursor of this API (use nextCursor as given)")

// List reads one page of the entries f selects, newest first.
func List(ctx context.Context, db store.Querier, f Filter) (Page, error) {
	afterAt, afterID, err := parseCursor(f.Cursor)
	if err != nil {
		return Page{}, err
	}
	rows, err := db.Query(ctx, `SELECT id, at, actor, role, action, target, outcome, status, detail
		FROM console_audit
		WHERE ($1 = '' OR action = $1) AND ($2 = '' OR actor = $2) AND ($3 = '' OR target = $3)
		  AND ($4::timestamptz IS NULL OR at >= $4) AND ($5::timestamptz IS NULL OR at < $5)
		  AND ($6::timestamptz IS NULL OR (at, id) < ($6, $7))
		ORDER BY at DESC, id DESC LIMIT $8`, f.Action, f.Actor, f.Target, f.Since, f.Until, afterAt, afterID, f.Limit+1)
	if err != nil {
		return Page{}, fmt.Errorf("read audit: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Entry, error) {
		var e Entry
		err := row.Scan(&e.ID, &e.At, &e.Actor, &e.Role, &e.Action, &e.Target, &e.Outcome, &e.Status, &e.Detail)
		return e, err
	})
	if err != nil {
		return Page{}, fmt.Errorf("read audit: %w", err)
	}
	page := Page{Entries: list}
	if len(list) > f.Limit {
		page.Entries = list[:f.Limit]
		last := list[f.Limit-1]
		c := base64.RawURLEncoding.EncodeToString([]byte(last.At.UTC().Format(time.RFC3339Nano) + "," +
			strconv.FormatInt(last.ID, 10)))
		page.NextCursor = &c
	}
	if page.Entries == nil {
		page.Entries = []Entry{}
	}
	return page, nil
}

// parseCursor reads a cursor List made: the time and id of the last entry
// of the page before (nil for "").
func parseCursor(c string) (*time.Time, int64, error) {
	if c == "" {
		return nil, 0, nil
	}
	raw, _ := base64.RawURLEncoding.DecodeString(c)
	ts, id, _ := strings.Cut(string(raw), ",")
	at, terr := time.Parse(time.RFC3339Nano, ts)
	n, ierr := strconv.ParseInt(id, 10, 64)
	if terr != nil || ierr != nil {
		return nil, 0, ErrBadCursor
	}
	return &at, n, nil
}
