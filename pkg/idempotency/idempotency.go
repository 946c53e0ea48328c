// Package idempotency keeps the Idempotency-Key of a task submission
// (POST /api/tasks with the header, dubctl submit --idempotency-key in
// either mode) in Postgres (table idempotency_keys), so that a client that
// sends a submission again — after a timeout, a dropped connection, a
// retry of its own — gets the first answer again instead of a second task.
//
// A key belongs to a principal (the console's token name; dubctl's
// "cli:<user>") and lives TTL. Within it, the same key with the same
// request (its fingerprint, computed by the door) answers what the first
// request answered; with another request it is refused (ErrReused); while
// the first request is still in flight, the next ones wait for it, so that
// concurrent requests with one key create one task. Only a created task is
// remembered: a refused request's key is forgotten at once (Abandon) and
// the next request with it is judged afresh.
package idempotency

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/store"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// TTL is how long a key is remembered after the request that used it first.
const TTL = 24 * time.Hour

// StaleAfter is how long a first request may stay in flight before the
// next one with its key takes it over (its process stopped before it could
// answer); the task id it reserved is kept.
const StaleAfter = time.Hour

// MaxKeyLength bounds a key, in bytes.
const MaxKeyLength = 255

// ErrReused is returned for a key used within TTL by a different request.
var ErrReused = errors.New("the Idempotency-Key was used in the last 24 hours for a different request")

// Key is a principal's key.
type Key struct {
	Principal string
	Key       string
}

// Answer is what the first request with a key answered.
type Answer struct {
	TaskID uuid.UUID
	Status int
	Body   []byte
}

// CheckKey accepts 1..MaxKeyLength visible ASCII characters (no space, no
// control character): what fits an HTTP header and a log line unquoted.
func CheckKey(k string) error {
	if k == "" || len(k) > MaxKeyLength {
		return fmt.Errorf("Idempotency-Key: %d characters, want 1..%d", len(k), MaxKeyLength)
	}
	for i := range len(k) {
		if k[i] < 0x21 || k[i] > 0x7e {
			return errors.New("Idempotency-Key: want visible ASCII characters only (no spaces or control characters)")
		}
	}
	return nil
}

// claimSQL takes a key: a new row, or the row of an expired key, or that
// of a first request in flight longer than StaleAfter with the same
// fingerprint (keeping the task id it reserved). It returns the task id the
// owner creates; no row when the key is held by a live request or answered.
const claimSQL = `INSERT INTO idempotency_keys AS k (principal, key, fingerprint, task_id, expires_at)
VALUES ($1, $2, $3, $4, now() + $5 * interval '1 second')
ON CONFLICT (principal, key) DO UPDATE
   SET fingerprint = EXCLUDED.fingerprint, status = NULL, body = NULL, created_at = now(),
       expires_at = EXCLUDED.expires_at,
       task_id = CASE WHEN k.expires_at <= now() THEN EXCLUDED.task_id ELSE coalesce(k.task_id, EXCLUDED.task_id) END
 WHERE k.expires_at <= now()
    OR (k.status IS NULL AND k.created_at < now() - $6 * interval '1 second' AND k.fingerprint = EXCLUDED.fingerprint)
RETURNING task_id`

// Begin claims k for a request whose fingerprint is fp and that would
// create the task taskID. owned: this request does the work and then calls
// Finish (created) or Abandon (refused), creating the task it is given
// back (taskID, or the one a stale first request reserved). Otherwise the
// first request's answer is returned — after waiting, polling every poll
// at most, while that request is in flight (until ctx ends) — or
// ErrReused.
func Begin(ctx context.Context, db store.Querier, k Key, fp []byte, taskID uuid.UUID, poll time.Duration) (owned bool, id uuid.UUID, a Answer, err error) {
	wait := min(50*time.Millisecond, poll)
	for {
		var reserved *uuid.UUID
		err := db.QueryRow(ctx, claimSQL, k.Principal, k.Key, fp, nullable(taskID), TTL.Seconds(), StaleAfter.Seconds()).Scan(&reserved)
		switch {
		case err == nil:
			return true, deref(reserved), Answer{}, nil
		case !errors.Is(err, pgx.ErrNoRows):
			return false, uuid.Nil, Answer{}, fmt.Errorf("claim idempotency key: %w", err)
		}
		a, done, err := answered(ctx, db, k, fp)
		if err != nil || done {
			return false, a.TaskID, a, err
		}
		select {
		case <-ctx.Done():
			return false, uuid.Nil, Answer{}, fmt.Errorf("wait for the first request with the idempotency key: %w", ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, poll)
	}
}

// answered reads k's row: done with the first request's answer, not done
// while it is in flight (or gone: the caller claims again), ErrReused for
// another fingerprint.
func answered(ctx context.Context, db store.Querier, k Key, fp []byte) (Answer, bool, error) {
	var stored []byte
	var id *uuid.UUID
	var status *int
	var a Answer
	err := db.QueryRow(ctx, `SELECT fingerprint, task_id, status, body FROM idempotency_keys
		WHERE principal = $1 AND key = $2 AND expires_at > now()`, k.Principal, k.Key).Scan(&stored, &id, &status, &a.Body)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return a, false, nil
	case err != nil:
		return a, false, fmt.Errorf("read idempotency key: %w", err)
	case !bytes.Equal(stored, fp):
		return a, false, ErrReused
	case status == nil:
		return a, false, nil
	}
	a.TaskID, a.Status = deref(id), *status
	return a, true, nil
}

// Finish records the answer of k's request, which created a.TaskID.
func Finish(ctx context.Context, db store.Querier, k Key, a Answer) error {
	body := a.Body
	if body == nil {
		body = []byte{}
	}
	if _, err := db.Exec(ctx, `UPDATE idempotency_keys SET task_id = $3, status = $4, body = $5
		WHERE principal = $1 AND key = $2`, k.Principal, k.Key, a.TaskID, a.Status, body); err != nil {
		return fmt.Errorf("record idempotency key: %w", err)
	}
	return nil
}

// Abandon forgets k after its request was refused: the next request with
// it is judged afresh.
func Abandon(ctx context.Context, db store.Querier, k Key) error {
	if _, err := db.Exec(ctx, `DELETE FROM idempotency_keys WHERE principal = $1 AND key = $2 AND status IS NULL`,
		k.Principal, k.Key); err != nil {
		return fmt.Errorf("forget idempotency key: %w", err)
	}
	return nil
}

// Sweep deletes the expired keys and returns how many.
func Sweep(ctx context.Context, db store.Querier) (int64, error) {
	tag, err := db.Exec(ctx, `DELETE FROM idempotency_keys WHERE expires_at <= now()`)
	if err != nil {
		return 0, fmt.Errorf("sweep idempotency keys: %w", err)
	}
	return tag.RowsAffected(), nil
}

func nullable(id uuid.UUID) *uuid.UUID {
	if id == uuid.Nil {
		return nil
	}
	return &id
}

func deref(id *uuid.UUID) uuid.UUID {
	if id == nil {
		return uuid.Nil
	}
	return *id
}
