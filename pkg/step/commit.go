package step

import (
	"context"

	"errors"
	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/jackc/pgx/v5"
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
	batch := &pgx.Batch{}
	for _, s := range stmts {
		batch.Queue(s.sql, cleanArgs(s.args)...)
	}
	read := func(br pgx.BatchResults) ([]*outbox.Message, error) {
		var out []*outbox.Message
		for _, s := range stmts {
			if s.transition != nil {
				// A step of a task without a row (a waiting-queue
				// entry's, a test's) changes no task.
				res, err := s.transition.Scan(br.QueryRow())
				if err != nil && !errors.Is(err, task.ErrNotFound) {
					return nil, err
				}
				if res.EventID != 0 {
					out = append(out, s.transition.Event)
				}
				continue
			}
			if s.outbox == nil {
				if _, err := br.Exec(); err != nil {
					return nil, err
				}
				continue
			}
			var id *int64
			if err := br.QueryRow().Scan(&id); err != nil {
				return nil, err
			}
			if id != nil {
				s.outbox.ID = *id
				out = append(out, s.outbox)
			}
		}
		return out, br.Close()
	}
	if len(fns) == 0 {
		// A batch runs in one implicit transaction: all or nothing.
		br := pool.SendBatch(ctx, batch)
		out, err := read(br)
		if err != nil {
			_ = br.Close()
			return nil, err
		}
		return out, nil
	}
	var out []*outbox.Message
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, fn := range fns {
			if err := fn(ctx, tx); err != nil {
				return err
			}
		}
		var err error
		out, err = read(tx.SendBatch(ctx, batch))
		return err
	})
	return out, err
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
