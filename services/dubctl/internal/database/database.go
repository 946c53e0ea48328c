package database

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/dlq"
	"github.com/dubflow/dubflow/pkg/dub"
	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/dubflow/dubflow/services/dubctl/internal/shape"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Backend is database mode: the read model over Postgres, the object
// store and the broker, with the workers' credentials.
type Backend struct {
	*clients
	warn    io.Writer
	changes *task.Listener
	// actor is who acts (--as, else the operating-system user): the audit
	// log's actor of every change (audit.go).
	actor string
	known Known
}

// Open prepares database mode for actor, warnings to warn; known are the
// errors of main's own calls (Record). Nothing is connected yet.
func Open(warn io.Writer, actor string, known Known) (*Backend, error) {
	c, err := newClients()
	if err != nil {
		return nil, err
	}
	return &Backend{clients: c, warn: warn, actor: actor, known: known}, nil
}

// Pool returns the Postgres pool, connecting on first use.
func (d *Backend) Pool(ctx context.Context) (*pgxpool.Pool, error) { return d.db(ctx) }

// Close stops listening and closes the connections.
func (d *Backend) Close() {
	if d.changes != nil {
		d.changes.Close()
	}
	d.clients.close()
}

// Task loads the task (view.Load) with its links, signed as the console
// signs them (view.SignLinks), and its timing report.
func (d *Backend) Task(ctx context.Context, id uuid.UUID) (*view.Task, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return nil, err
	}
	t, err := view.Load(ctx, pool, id)
	if err != nil {
		return nil, err
	}
	signer, err := d.presigner(ctx)
	if err != nil {
		return nil, err
	}
	if err := view.SignLinks(ctx, signer, t, time.Duration(d.cfg.PresignSeconds)*time.Second); err != nil {
		d.warnf("%v", err)
	}
	if t.Stream != nil && t.Stream.PlaylistKey != "" {
		t.Stream.URL = s3URL(d.cfg.S3) + "/" + t.Stream.PlaylistKey // the stored playlist: the console serves it to a player
	}
	if view.OutputOf(t.Result).TimingReportKey != "" {
		objects, err := d.blob(ctx)
		if err != nil {
			return nil, err
		}
		view.ReadTimingReport(ctx, objects, t)
	}
	return t, nil
}

// List reads one page of tasks.
func (d *Backend) List(ctx context.Context, f view.Filter, _ shape.Range) (view.Page, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return view.Page{}, err
	}
	return view.List(ctx, pool, f)
}

// Segments reads the task's lines.
func (d *Backend) Segments(ctx context.Context, id uuid.UUID) ([]view.Segment, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return nil, err
	}
	return view.Segments(ctx, pool, id)
}

// Versions reads the task's outputs.
func (d *Backend) Versions(ctx context.Context, id uuid.UUID) ([]view.Version, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return nil, err
	}
	return view.Versions(ctx, pool, id)
}

// DeadLetters lists dead letters.
func (d *Backend) DeadLetters(ctx context.Context, f view.DeadLetterFilter) ([]view.DeadLetter, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return nil, err
	}
	return view.DeadLetters(ctx, pool, f)
}

// DeadLetter reads one dead letter.
func (d *Backend) DeadLetter(ctx context.Context, id int64) (*view.DeadLetter, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return nil, err
	}
	return view.GetDeadLetter(ctx, pool, id)
}

// commit runs fn in one transaction and publishes the outbox rows it
// returns after the commit (outbox.Commit); a publish that fails is a
// warning, left to a worker's outbox sweep: the change is done.
func (d *Backend) commit(ctx context.Context, fn func(tx pgx.Tx) ([]int64, error)) error {
	pool, err := d.db(ctx)
	if err != nil {
		return err
	}
	pub, err := d.publisher(ctx)
	if err != nil {
		return err
	}
	err = outbox.Commit(ctx, pool, pub, fn)
	if errors.Is(err, outbox.ErrUnpublished) {
		d.warnf("publish deferred to the outbox sweep: %v", err)
		return nil
	}
	return err
}

// publish publishes outbox rows committed by a transaction of their own
// (a submission's); a publish that fails is a warning, left to a worker's
// outbox sweep.
func (d *Backend) publish(ctx context.Context, ids []int64) {
	pub, err := d.publisher(ctx)
	if err == nil {
		err = outbox.Flush(ctx, d.pool, pub, ids)
	}
	if err != nil {
		d.warnf("publish deferred to the outbox sweep: %v", err)
	}
}

// warnf prints a warning: something that did not stop the command.
func (d *Backend) warnf(format string, args ...any) {
	fmt.Fprintf(d.warn, "dubctl: warning: "+format+"\n", args...)
}

// Redub changes one line (dub.Redub) and publishes the re-dub.
func (d *Backend) Redub(ctx context.Context, id uuid.UUID, n int, text string) (*dub.Redubbed, error) {
	if _, err := d.db(ctx); err != nil {
		return nil, err
	}
	if _, err := d.publisher(ctx); err != nil {
		return nil, err
	}
	var r *dub.Redubbed
	err := d.commit(ctx, func(tx pgx.Tx) ([]int64, error) {
		var err error
		if r, err = dub.Redub(ctx, tx, id, n, text); err != nil {
			return nil, err
		}
		return r.Outbox, nil
	})
	d.record(ctx, actionOf("redub", id.String(), http.StatusAccepted), err)
	if errors.Is(err, dub.ErrNoSegment) || errors.Is(err, dub.ErrInvalidText) {
		return nil, cli.UsageError(err)
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}

// Replay replays one dead letter (dlq.Replay).
func (d *Backend) Replay(ctx context.Context, id int64, force bool) (dlq.Replayed, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return dlq.Replayed{}, err
	}
	pub, err := d.publisher(ctx)
	if err != nil {
		return dlq.Replayed{}, err
	}
	r, err := dlq.Replay(ctx, pool, pub, id, dlq.Options{Force: force})
	if err != nil && r.Attempt != 0 {
		// Replayed; its message waits for the outbox sweep.
		d.warnf("publish deferred to the outbox sweep: %v", err)
		err = nil
	}
	d.record(ctx, actionOf("replay", strconv.FormatInt(id, 10), http.StatusOK), err)
	return r, err
}

// Changed waits for a change of the task's status (task.Listener, LISTEN
// on Postgres), at most within.
func (d *Backend) Changed(ctx context.Context, id uuid.UUID, within time.Duration) error {
	if d.changes == nil {
		pool, err := d.db(ctx)
		if err != nil {
			return err
		}
		d.changes = task.Listen(ctx, pool)
	}
	return d.changes.Wait(ctx, within, func(changed string) bool { return changed == id.String() })
}

// Fetch downloads key from the object store.
func (d *Backend) Fetch(ctx context.Context, _ *view.Task, key, path string, limit int64) error {
	objects, err := d.blob(ctx)
	if err != nil {
		return err
	}
	err = objects.GetFile(ctx, key, path, limit)
	switch {
	case errors.Is(err, blob.ErrNotFound):
		return fmt.Errorf("%s: %w", key, shape.ErrNoObject)
	case errors.Is(err, blob.ErrTooLarge):
		return fmt.Errorf("%w (MAX_VIDEO_BYTES+MAX_AUDIO_BYTES)", err)
	}
	return err
}
