package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/internal/outboxrow"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Sweep publishes up to limit outbox rows older than age (and not pausing
// after a failed publish), in order, each confirmed, and deletes them, in
// one transaction that locks the rows (SKIP LOCKED), so processes sweeping at
// once never publish the same row twice. It returns the messages published
// and those moved to dead_letters: rows whose publish failed wait for a
// later sweep, and a row the broker refused MaxFailures times is moved
// (see publishLocked). The step runtime's relay sweeps periodically
// (pkg/internal/relay), the start-up recovery once.
func Sweep(ctx context.Context, pool *pgxpool.Pool, pub Publisher, age time.Duration, limit int) (sent, moved []*Message, err error) {
	var perr error
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var err error
		sent, moved, perr, err = publishLocked(ctx, tx, pub, true, `SELECT id, message_id, exchange, routing_key, body, failures FROM outbox
			WHERE created_at < now() - $1::interval AND (next_try_at IS NULL OR next_try_at <= now())
			ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED`, age, limit)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return sent, moved, perr
}

// Flush publishes the given outbox rows, committed already, now, each
// confirmed, and deletes them; rows another process is publishing at the
// same moment are skipped. A change and its messages commit together with
// Commit, which flushes them; Flush alone is for rows committed by
// statements of their own (held parts let in by the start-up recovery and
// the reconciler) or left behind (the reconciler's outbox pass).
func Flush(ctx context.Context, pool *pgxpool.Pool, pub Publisher, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	var perr error
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var err error
		_, _, perr, err = publishLocked(ctx, tx, pub, false, `SELECT id, message_id, exchange, routing_key, body, failures FROM outbox
			WHERE id = ANY($1) ORDER BY id FOR UPDATE SKIP LOCKED`, ids)
		return err
	})
	if err != nil {
		return err
	}
	return perr
}

// publishTimeout bounds one publish of a sweep or flush: the publisher
// retries a publish lost with its channel until its context ends.
const publishTimeout = 10 * time.Second

// MaxFailures is how often the broker may refuse an outbox row (no queue
// for its routing key, its exchange missing, a nack) before the sweep moves
// it to dead_letters with the last refusal as its reason: retried with
// pauses growing to a minute, about six minutes. Publishes that time out
// (the broker unreachable) count towards the pauses but never move a row.
const MaxFailures = 10

// publishLocked selects outbox rows with query (which locks them and reads
// id, message_id, exchange, routing_key, body, failures), publishes them in
// order, each confirmed, and deletes those published. A row the broker
// refuses does not block the others: its failure is recorded on the row
// (failures, last_error) and it is tried again after a growing pause
// (next_try_at, at most a minute); with move, a row refused for the
// MaxFailures-th time is moved to dead_letters instead (returned as moved).
// A publish that times out (the broker is unreachable) stops the run, as
// the rows after it would fail too. The publish failures are returned as
// perr (those published are still deleted when tx commits); err reports a
// database failure, after which tx must roll back.
func publishLocked(ctx context.Context, tx pgx.Tx, pub Publisher, move bool, query string, args ...any) (sent, moved []*Message, perr, err error) {
	msgs, failures, err := readLocked(ctx, tx, query, args...)
	if err != nil {
		return nil, nil, nil, err
	}
	var ids []int64
	var failed []error
	for i, m := range msgs {
		pctx, cancel := context.WithTimeout(ctx, publishTimeout)
		err := pub.Publish(pctx, m.Exchange, m.RoutingKey, m.Publishing())
		cancel()
		if err == nil {
			ids = append(ids, m.ID)
			sent = append(sent, m)
			continue
		}
		err = fmt.Errorf("publish outbox row %d to %s: %w", m.ID, m.RoutingKey, err)
		failed = append(failed, err)
		outage := ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded)
		if move && !outage && failures[i]+1 >= MaxFailures {
			if derr := deadLetter(ctx, tx, m, failures[i]+1, err); derr != nil {
				return nil, nil, errors.Join(failed...), derr
			}
			moved = append(moved, m)
			continue
		}
		if uerr := outboxrow.Fail(ctx, tx, m.ID, wire.Reason(err.Error())); uerr != nil {
			return nil, nil, errors.Join(failed...), uerr
		}
		if outage {
			break
		}
	}
	perr = errors.Join(failed...)
	if len(ids) > 0 {
		if err := outboxrow.Delete(ctx, tx, ids); err != nil {
			return nil, nil, perr, fmt.Errorf("published: %w", err)
		}
	}
	return sent, moved, perr, nil
}

// readLocked reads the outbox rows query selects, with their failures so far.
func readLocked(ctx context.Context, tx pgx.Tx, query string, args ...any) ([]*Message, []int, error) {
	rows, err := tx.Query(ctx, query, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("select outbox: %w", err)
	}
	var failures []int
	msgs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Message, error) {
		m := &Message{}
		var n int
		err := row.Scan(&m.ID, &m.MessageID, &m.Exchange, &m.RoutingKey, &m.Body, &n)
		failures = append(failures, n)
		return m, err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read outbox: %w", err)
	}
	return msgs, failures, nil
}
