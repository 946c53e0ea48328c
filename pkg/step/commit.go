package step

import (
	"context"
	"errors"

	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// commit runs fns and stmts in one transaction and returns the outbox
// messages it added, with their ids. Without fns the whole transaction is one
// batch: one round trip.
//
// commit is the runtime's boundary to Postgres: every text argument (error
// texts, reasons, what handlers stage) is made clean text (wire.CleanText)
// on its way in, so that no text makes a commit fail.
func commit(ctx context.Context, pool *pgxpool.Pool, fns []func(context.Context, pgx.Tx) error, stmts []stmt) ([]*outbox.Message, error) {
	if len(fns) == 0 {
		// A batch runs in one implicit transaction: all or nothing.
		batch, out := &pgx.Batch{}, new([]*outbox.Message)
		queueStmts(batch, stmts, out)
		if err := pool.SendBatch(ctx, batch).Close(); err != nil {
			return nil, err
		}
		return *out, nil
	}
	return commitTx(ctx, pool, fns, stmts)
}

// commitTx is commit with fns: a transaction of several round trips.
func commitTx(ctx context.Context, pool *pgxpool.Pool, fns []func(context.Context, pgx.Tx) error, stmts []stmt) ([]*outbox.Message, error) {
	var out []*outbox.Message
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, fn := range fns {
			if err := fn(ctx, tx); err != nil {
				return err
			}
		}
		batch, added := &pgx.Batch{}, new([]*outbox.Message)
		queueStmts(batch, stmts, added)
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return err
		}
		out = *added
		return nil
	})
	return out, err
}

// commit is the package's commit through the runner's combiner: without
// fns, the commits of concurrent deliveries share round trips and
// transactions (see combiner), each still all or nothing; key is the
// delivery's task.
func (r *Runner) commit(ctx context.Context, key string, fns []func(context.Context, pgx.Tx) error, stmts []stmt) ([]*outbox.Message, error) {
	if len(fns) > 0 {
		return commitTx(ctx, r.cfg.Pool, fns, stmts)
	}
	var out []*outbox.Message
	err := r.commits.do(ctx, key, func(b *pgx.Batch) {
		out = out[:0]
		queueStmts(b, stmts, &out)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// queueStmts queues stmts on batch, each with the callback that reads its
// result when the batch is closed; out then holds the outbox messages they
// added, in order, with their ids. The statements are self-contained, so
// that those of several deliveries can be sent together.
func queueStmts(batch *pgx.Batch, stmts []stmt, out *[]*outbox.Message) {
	for _, s := range stmts {
		q := batch.Queue(s.sql, cleanArgs(s.args)...)
		switch {
		case s.transition != nil:
			q.QueryRow(func(row pgx.Row) error {
				// A step of a task without a row (a waiting-queue
				// entry's, a test's) changes no task.
				res, err := s.transition.Scan(row)
				if err != nil && !errors.Is(err, task.ErrNotFound) {
					return err
				}
				if res.EventID != 0 {
					*out = append(*out, s.transition.Event)
				}
				return nil
			})
		case s.released:
			q.Query(func(rows pgx.Rows) error { return scanReleased(rows, out) })
		case s.outbox != nil:
			q.QueryRow(func(row pgx.Row) error {
				var id *int64
				if err := row.Scan(&id); err != nil {
					return err
				}
				if id != nil {
					s.outbox.ID = *id
					*out = append(*out, s.outbox)
				}
				return nil
			})
		default:
			q.Exec(func(pgconn.CommandTag) error { return nil })
		}
	}
}

// scanReleased adds the outbox rows rows lists (id, message id, exchange,
// routing key, body) to out.
func scanReleased(rows pgx.Rows, out *[]*outbox.Message) error {
	for rows.Next() {
		o := &outbox.Message{}
		if err := rows.Scan(&o.ID, &o.MessageID, &o.Exchange, &o.RoutingKey, &o.Body); err != nil {
			return err
		}
		*out = append(*out, o)
	}
	return rows.Err()
}

// cleanArgs returns args with every text (string, *string, []string) made
// clean text; other values, byte slices among them, are left alone.
func cleanArgs(args []any) []any {
	out := args
	for i, a := range args {
		var c any
		switch v := a.(type) {
		case string:
			if cv := wire.CleanText(v); cv != v {
				c = cv
			}
		case *string:
			if v != nil {
				if cv := wire.CleanText(*v); cv != *v {
					c = &cv
				}
			}
		case []string:
			for j, e := range v {
				if cv := wire.CleanText(e); cv != e {
					cs := append([]string(nil), v...)
					cs[j] = cv
					for k := j + 1; k < len(cs); k++ {
						cs[k] = wire.CleanText(cs[k])
					}
					c = cs
					break
				}
			}
		}
		if c != nil {
			if &out[0] == &args[0] {
				out = append([]any(nil), args...)
			}
			out[i] = c
		}
	}
	return out
}
