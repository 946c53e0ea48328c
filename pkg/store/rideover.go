package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// FailoverWait is how long RideOver waits, by default, for a database
// that went away to answer again: a failover manager replaces a lost
// primary in its leader lock's lifetime plus a check (Patroni's defaults:
// 30 s + 10 s; the local HA stack's: 10 s + 1 s) and clients then connect
// to the new primary through their multi-host URL.
const FailoverWait = 45 * time.Second

// maxSentFailures bounds the tries whose statements reached a server that
// then failed them as an outage: a server that keeps ending the session
// (or a transaction that ends its own) is not waited for.
const maxSentFailures = 3

// RideOver runs try, and runs it again while it fails because the database
// is unreachable (Unreachable: the primary went away, a standby is taking
// over, or the server answering is a standby now), for at most wait,
// pausing 200 ms, doubling up to 2 s. unknown tells try whether an
// earlier try may have been applied: false for the first try and after
// failures that happened before anything was sent (the connection could
// not be made, or the server refused the statement); true once a try
// failed after sending its statements — a commit whose outcome is unknown.
// try must then find out by reading what that try did, and never do its
// effect a second time. RideOver returns try's last error: nil, an error
// of try's own (not retried), or the outage when it outlasted wait or
// ended maxSentFailures tries after their statements were sent.
func RideOver(ctx context.Context, wait time.Duration, try func(ctx context.Context, unknown bool) error) error {
	deadline := time.Now().Add(wait)
	pause := 200 * time.Millisecond
	unknown, sent := false, 0
	for {
		err := try(ctx, unknown)
		if !Unreachable(err) {
			return err
		}
		if MayHaveApplied(err) {
			unknown = true
			sent++
		}
		if sent >= maxSentFailures || time.Now().Add(pause).After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (gave up waiting for the database: %w)", err, ctx.Err())
		case <-time.After(pause):
		}
		pause = min(2*pause, 2*time.Second)
	}
}

// MayHaveApplied reports whether a statement or transaction that failed
// with err may have been applied all the same: its connection broke, or
// its server ended the session, after the statements were sent (for a
// COMMIT: the commit's outcome is unknown). It is false when nothing was
// sent — no connection could be made, pgx says the request never left or
// failed while a batch's statements were prepared (before any ran), or
// the server refused it at once (a standby refusing a write: 25006; a
// server starting up: 57P03; too many connections: 53300).
func MayHaveApplied(err error) bool {
	if err == nil {
		return false
	}
	var connect *pgconn.ConnectError
	var batch pgx.ErrPreprocessingBatch
	if errors.As(err, &connect) || errors.As(err, &batch) || pgconn.SafeToRetry(err) {
		// Nothing was sent, or only a batch's statements to prepare.
		return false
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		switch pg.Code {
		case "25006", "57P03", "53300":
			return false
		}
	}
	return true
}
