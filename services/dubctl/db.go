package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/admit"
	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/dlq"
	"github.com/dubflow/dubflow/pkg/dub"
	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/tenant"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// dbBackend is database mode: the read model over Postgres, the object
// store and the broker, with the workers' credentials.
type dbBackend struct {
	*clients
	warn    io.Writer
	changes *task.Listener
	// actor is who acts (--as, else the operating-system user): the audit
	// log's actor of every change (dbaudit.go).
	actor string
}

func newDBBackend(warn io.Writer, actor string) (*dbBackend, error) {
	c, err := newClients()
	if err != nil {
		return nil, err
	}
	return &dbBackend{clients: c, warn: warn, actor: actor}, nil
}

// Close stops listening and closes the connections.
func (d *dbBackend) Close() {
	if d.changes != nil {
		d.changes.Close()
	}
	d.clients.close()
}

// Task loads the task (view.Load) with its links, signed as the console
// signs them (view.SignLinks), and its timing report.
func (d *dbBackend) Task(ctx context.Context, id uuid.UUID) (*view.Task, error) {
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
func (d *dbBackend) List(ctx context.Context, f listFilter) (view.Page, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return view.Page{}, err
	}
	return view.List(ctx, pool, f.Filter)
}

// Segments reads the task's lines.
func (d *dbBackend) Segments(ctx context.Context, id uuid.UUID) ([]view.Segment, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return nil, err
	}
	return view.Segments(ctx, pool, id)
}

// Versions reads the task's outputs.
func (d *dbBackend) Versions(ctx context.Context, id uuid.UUID) ([]view.Version, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return nil, err
	}
	return view.Versions(ctx, pool, id)
}

// DeadLetters lists dead letters.
func (d *dbBackend) DeadLetters(ctx context.Context, f view.DeadLetterFilter) ([]view.DeadLetter, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return nil, err
	}
	return view.DeadLetters(ctx, pool, f)
}

// DeadLetter reads one dead letter.
func (d *dbBackend) DeadLetter(ctx context.Context, id int64) (*view.DeadLetter, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return nil, err
	}
	return view.GetDeadLetter(ctx, pool, id)
}

// Rules are the configured default languages and media limits and what
// the workers' engines announced (admit.LoadCapabilities).
func (d *dbBackend) Rules(ctx context.Context) (admit.Rules, admit.Limits, error) {
	var limits config.Limits
	if err := config.Load(config.Environ(), &limits); err != nil {
		return admit.Rules{}, admit.Limits{}, err
	}
	pool, err := d.db(ctx)
	if err != nil {
		return admit.Rules{}, admit.Limits{}, err
	}
	caps, err := admit.LoadCapabilities(ctx, pool)
	if err != nil {
		return admit.Rules{}, admit.Limits{}, err
	}
	return admit.Rules{DefaultSource: d.cfg.DefaultSourceLanguage, DefaultTarget: d.cfg.DefaultTargetLanguage,
		Capabilities: caps}, admit.LimitsOf(limits), nil
}

// Submit uploads the video to videos/{id}/source.mp4 (and the subtitle
// files to subtitles/{id}/), then creates the task and its first message in one transaction (task.Submit) and
// publishes it. Everything is connected before anything is changed.
func (d *dbBackend) Submit(ctx context.Context, s submission) (uuid.UUID, error) {
	if s.idempotencyKey == "" {
		return d.submit(ctx, s, uuid.New())
	}
	pool, err := d.db(ctx)
	if err != nil {
		return uuid.Nil, err
	}
	return submitOnce(ctx, pool, s, d.submit)
}

// submit creates the task id of s (Submit).
func (d *dbBackend) submit(ctx context.Context, s submission, id uuid.UUID) (uuid.UUID, error) {
	p := s.task.Payload(id)
	p.Project = cmp.Or(s.project, tenant.Default)
	env, err := wire.New(wire.StepExtractAudio, id, "", p)
	if err != nil {
		return uuid.Nil, usageError(err)
	}
	pool, err := d.db(ctx)
	if err != nil {
		return uuid.Nil, err
	}
	if ok, err := tenant.Exists(ctx, pool, p.Project); err != nil || !ok {
		if err == nil { // the console's words
			err = usageError(fmt.Errorf("project %q: no such project", p.Project))
		}
		return uuid.Nil, err
	}
	objects, err := d.blob(ctx)
	if err != nil {
		return uuid.Nil, err
	}
	if _, err := d.publisher(ctx); err != nil {
		return uuid.Nil, err
	}
	// Uploaded once, whatever the languages: where the transcription ends
	// the system copies it to each language's child task (server-side).
	if err := objects.PutFile(ctx, p.SourceVideoKey, s.input, "video/mp4"); err != nil {
		return uuid.Nil, err
	}
	for _, f := range s.task.SubtitleFiles(id) {
		if err := objects.Put(ctx, f.Key, strings.NewReader(f.Text), int64(len(f.Text)), f.ContentType); err != nil {
			return uuid.Nil, err
		}
	}
	// Not in outbox.Commit: a submission commits in a transaction of its
	// own, which rides over a database failover (task.SubmitProbed).
	ids, err := task.SubmitProbed(ctx, pool, env, p, s.task.FileName, s.probe)
	target := id.String()
	if err != nil {
		target = ""
	}
	d.record(ctx, actionOf("submit", target, http.StatusCreated), err)
	if err != nil {
		return uuid.Nil, err
	}
	d.publish(ctx, ids)
	return id, nil
}

// commit runs fn in one transaction and publishes the outbox rows it
// returns after the commit (outbox.Commit); a publish that fails is a
// warning, left to a worker's outbox sweep: the change is done.
func (d *dbBackend) commit(ctx context.Context, fn func(tx pgx.Tx) ([]int64, error)) error {
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
func (d *dbBackend) publish(ctx context.Context, ids []int64) {
	pub, err := d.publisher(ctx)
	if err == nil {
		err = outbox.Flush(ctx, d.pool, pub, ids)
	}
	if err != nil {
		d.warnf("publish deferred to the outbox sweep: %v", err)
	}
}

// warnf prints a warning: something that did not stop the command.
func (d *dbBackend) warnf(format string, args ...any) {
	fmt.Fprintf(d.warn, "dubctl: warning: "+format+"\n", args...)
}

// Redub changes one line (dub.Redub) and publishes the re-dub.
func (d *dbBackend) Redub(ctx context.Context, id uuid.UUID, n int, text string) (*dub.Redubbed, error) {
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
		return nil, usageError(err)
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}

// Replay replays one dead letter (dlq.Replay).
func (d *dbBackend) Replay(ctx context.Context, id int64, force bool) (dlq.Replayed, error) {
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
func (d *dbBackend) Changed(ctx context.Context, id uuid.UUID, within time.Duration) error {
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
func (d *dbBackend) Fetch(ctx context.Context, _ *view.Task, key, path string, limit int64) error {
	objects, err := d.blob(ctx)
	if err != nil {
		return err
	}
	err = objects.GetFile(ctx, key, path, limit)
	switch {
	case errors.Is(err, blob.ErrNotFound):
		return fmt.Errorf("%s: %w", key, errNoObject)
	case errors.Is(err, blob.ErrTooLarge):
		return fmt.Errorf("%w (MAX_VIDEO_BYTES+MAX_AUDIO_BYTES)", err)
	}
	return err
}
