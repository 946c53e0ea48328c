// Package uploads is the presigned uploads' side of the object store:
// where an upload goes and whose it is, the lock a submission holds while
// it takes one, and the removal of what nobody may use any more (taken,
// refused, expired), by a request or by the sweeper.
package uploads

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/admit"
	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/ops"
	"github.com/dubflow/dubflow/pkg/tenant"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
)

// What becomes of an upload (uploads/{taskId}/source.mp4, written through
// a presigned POST policy of POST /api/uploads) nobody may use any more:
//
//   - taken: POST /api/tasks copied it to the task's videos/{taskId}/
//     source.mp4 and removed it. The policy may still be used until it
//     expires, but what it writes can neither change the task (which reads
//     its own copy) nor start another (a task of that id exists: 409); the
//     sweeper removes it on its next pass, and POST /api/tasks at once.
//   - refused: the upload itself was refused (not a media file, too long,
//     too large, expired): removed at once. A refusal of the request's
//     fields (a language, the glossary) keeps it for a corrected request.
//   - expired: an upload older than the policy's lifetime plus
//     Margin that no task took: removed by the sweeper, and refused
//     by POST /api/tasks. The age counts from the upload, so a client has
//     at least Margin after its upload to create the task.
//
// The sweeper runs in the console, not the reconciler: uploads are the
// console's own (it signs their policies, it alone reads them, it knows
// their lifetime and holds the lock a submission takes), and the
// reconciler never touches the object store. Replicas may sweep side by
// side: removals are idempotent, and the upload's lock keeps a sweep away
// from an upload a request is taking.
const (
	DropTaken   = "taken"
	DropRefused = "refused"
	DropExpired = "expired"
)

// Store is the uploads of one console.
type Store struct {
	Pool    *pgxpool.Pool
	Objects *blob.Store
	Log     zerolog.Logger
	// Expiry is how long an upload's policy lives.
	Expiry func() time.Duration
}

const (
	// Margin is how long an upload outlives its policy's lifetime.
	Margin = 5 * time.Minute
	// uploadSweepEvery is the time between the sweeper's passes.
	uploadSweepEvery = time.Minute
	// uploadSweepMax bounds the uploads one pass looks at.
	uploadSweepMax = 10000
)

// Deadline is how long after its upload an untaken upload is kept.
func (u Store) Deadline() time.Duration { return u.Expiry() + Margin }

// Expired refuses an upload written at modified that is past its
// deadline at now.
func (u Store) Expired(modified, now time.Time) error {
	if age := now.Sub(modified); age > u.Deadline() {
		return apierr.BadRequest(fmt.Sprintf("sourceVideoKey: the upload expired (uploaded %s ago, kept %s): POST /api/uploads for a new one",
			age.Round(time.Second), u.Deadline()))
	}
	return nil
}

// Refused reports whether err refuses the request (as opposed to not
// judging it now).
func Refused(err error) bool {
	if e, ok := admit.As(err); ok {
		return e.Kind != admit.Unavailable
	}
	var ae *apierr.Error
	return errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500
}

// Drop removes the upload at key for reason, even when the request
// that took or refused it is gone; it reports whether it did.
func (u Store) Drop(ctx context.Context, key, reason string) bool {
	if err := u.Objects.Remove(context.WithoutCancel(ctx), key); err != nil {
		u.Log.Warn().Err(err).Str("key", key).Str("reason", reason).Msg("remove upload")
		return false
	}
	u.Log.Info().Str("key", key).Str("reason", reason).Msg("upload removed")
	return true
}

// Sweep removes uploads nobody may use, at start and every
// uploadSweepEvery until ctx ends.
func (u Store) Sweep(ctx context.Context) error {
	pass := func(ctx context.Context) {
		if _, err := u.SweepOnce(ctx, time.Now()); err != nil && ctx.Err() == nil {
			u.Log.Warn().Err(err).Msg("upload sweep")
		}
	}
	pass(ctx)
	ops.Every(ctx, uploadSweepEvery, pass)
	return nil
}

// SweepOnce removes, as of now, the uploads a task took and those
// past their deadline, skipping any a request is taking (its lock is
// held); it returns the keys it removed with the reason.
func (u Store) SweepOnce(ctx context.Context, now time.Time) (map[string]string, error) {
	objs, err := u.Objects.List(ctx, Prefix, uploadSweepMax)
	if err != nil {
		return nil, fmt.Errorf("upload sweep: %w", err)
	}
	if len(objs) == uploadSweepMax {
		u.Log.Warn().Int("max", uploadSweepMax).Msg("upload sweep: more uploads than one pass looks at")
	}
	ids := make([]uuid.UUID, len(objs))
	for i, o := range objs {
		ids[i], _, _ = TaskOf(o.Key) // uuid.Nil: not an upload's key, judged by age alone
	}
	taken, err := u.tasksAmong(ctx, ids)
	if err != nil {
		return nil, err
	}
	removed := map[string]string{}
	for i, o := range objs {
		reason := ""
		switch {
		case ids[i] != uuid.Nil && taken[ids[i]]:
			reason = DropTaken
		case now.Sub(o.Modified) > u.Deadline():
			reason = DropExpired
		default:
			continue
		}
		if u.dropUnlessTaking(ctx, ids[i], o.Key, reason) {
			removed[o.Key] = reason
		}
	}
	return removed, nil
}

// dropUnlessTaking removes the upload at key unless a request holds its
// lock (it is taking it); it reports whether it removed it.
func (u Store) dropUnlessTaking(ctx context.Context, id uuid.UUID, key, reason string) bool {
	if id != uuid.Nil {
		unlock, err := u.Lock(ctx, id)
		if err != nil {
			return false // being taken, or the database is away: the next pass sees it again
		}
		defer unlock()
	}
	return u.Drop(ctx, key, reason)
}

// tasksAmong returns which of ids are tasks.
func (u Store) tasksAmong(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]bool, error) {
	rows, err := u.Pool.Query(ctx, `SELECT id FROM tasks WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("upload sweep: tasks of the uploads: %w", err)
	}
	found := map[uuid.UUID]bool{}
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, fmt.Errorf("upload sweep: tasks of the uploads: %w", err)
		}
		found[id] = true
	}
	return found, rows.Err()
}

// DefaultType is the content type of an upload whose client names
// none.
const DefaultType = "video/mp4"

// ContentType checks the content type a client announces for its
// upload (the policy holds the store to it): a video type, without
// parameters.
func ContentType(ct string) (string, error) {
	if ct == "" {
		return DefaultType, nil
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || len(params) != 0 || !strings.HasPrefix(mt, "video/") {
		return "", apierr.BadRequest(fmt.Sprintf("contentType %q: want a video type such as video/mp4", apierr.CutEcho(ct)))
	}
	return mt, nil
}

// Prefix is where presigned uploads go:
// uploads/{project}/{taskId}/source.mp4 (uploads/{taskId}/source.mp4
// before projects: the default project's), a key nothing but POST
// /api/tasks reads, which takes the task's own copy of it and removes it.
const Prefix = "uploads/"

// Key is where the upload of task id of project goes.
func Key(project string, id uuid.UUID) string {
	return Prefix + project + "/" + id.String() + "/source.mp4"
}

// TaskOf returns the task id and project of a key
// uploads/{project}/{taskId}/source.mp4 (or uploads/{taskId}/source.mp4,
// the default project's, from before projects).
func TaskOf(key string) (uuid.UUID, string, error) {
	const want = "sourceVideoKey: want the uploads/{project}/{taskId}/source.mp4 that POST /api/uploads answered"
	parts := strings.Split(key, "/")
	project := tenant.Default
	if len(parts) == 4 {
		project, parts = parts[1], append(parts[:1:1], parts[2:]...)
	}
	if len(parts) != 3 || !tenant.ValidID(project) {
		return uuid.Nil, "", apierr.BadRequest(want)
	}
	id, err := uuid.Parse(parts[1])
	if err != nil || (key != Key(project, id) && key != Prefix+id.String()+"/source.mp4") {
		return uuid.Nil, "", apierr.BadRequest(want)
	}
	return id, project, nil
}

// Lock holds a session lock on the upload of task id until unlock
// is called; a second request for the same upload meanwhile is refused.
func (u Store) Lock(ctx context.Context, id uuid.UUID) (unlock func(), err error) {
	conn, err := u.Pool.Acquire(ctx)
	if err != nil {
		return nil, apierr.UnavailableBecause("the database cannot be reached now; try again", err)
	}
	const key = `hashtextextended('dubflow upload ' || $1, 0)`
	var locked bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(`+key+`)`, id.String()).Scan(&locked); err != nil {
		conn.Release()
		return nil, fmt.Errorf("lock upload %s: %w", id, err)
	}
	if !locked {
		conn.Release()
		return nil, apierr.Conflict(fmt.Sprintf("upload %s is being submitted by another request", id))
	}
	return func() {
		if _, err := conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(`+key+`)`, id.String()); err != nil {
			conn.Conn().Close(context.WithoutCancel(ctx)) // closing the session releases its locks
		}
		conn.Release()
	}, nil
}
