package main

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/admit"
	"github.com/dubflow/dubflow/pkg/ops"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/google/uuid"
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
//     uploadMargin that no task took: removed by the sweeper, and refused
//     by POST /api/tasks. The age counts from the upload, so a client has
//     at least uploadMargin after its upload to create the task.
//
// The sweeper runs in the console, not the reconciler: uploads are the
// console's own (it signs their policies, it alone reads them, it knows
// their lifetime and holds the lock a submission takes), and the
// reconciler never touches the object store. Replicas may sweep side by
// side: removals are idempotent, and the upload's lock keeps a sweep away
// from an upload a request is taking.
const (
	dropTaken   = "taken"
	dropRefused = "refused"
	dropExpired = "expired"
)

const (
	// uploadMargin is how long an upload outlives its policy's lifetime.
	uploadMargin = 5 * time.Minute
	// uploadSweepEvery is the time between the sweeper's passes.
	uploadSweepEvery = time.Minute
	// uploadSweepMax bounds the uploads one pass looks at.
	uploadSweepMax = 10000
)

// uploadDeadline is how long after its upload an untaken upload is kept.
func (s *server) uploadDeadline() time.Duration { return s.uploadExpiry() + uploadMargin }

// uploadExpired refuses an upload written at modified that is past its
// deadline at now.
func (s *server) uploadExpired(modified, now time.Time) error {
	if age := now.Sub(modified); age > s.uploadDeadline() {
		return apierr.BadRequest(fmt.Sprintf("sourceVideoKey: the upload expired (uploaded %s ago, kept %s): POST /api/uploads for a new one",
			age.Round(time.Second), s.uploadDeadline()))
	}
	return nil
}

// refused reports whether err refuses the request (as opposed to not
// judging it now).
func refused(err error) bool {
	if e, ok := admit.As(err); ok {
		return e.Kind != admit.Unavailable
	}
	var ae *apiError
	return errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500
}

// dropUpload removes the upload at key for reason, even when the request
// that took or refused it is gone; it reports whether it did.
func (s *server) dropUpload(ctx context.Context, key, reason string) bool {
	if err := s.objects.Remove(context.WithoutCancel(ctx), key); err != nil {
		s.log.Warn().Err(err).Str("key", key).Str("reason", reason).Msg("remove upload")
		return false
	}
	s.log.Info().Str("key", key).Str("reason", reason).Msg("upload removed")
	return true
}

// sweepUploads removes uploads nobody may use, at start and every
// uploadSweepEvery until ctx ends.
func (s *server) sweepUploads(ctx context.Context) error {
	pass := func(ctx context.Context) {
		if _, err := s.sweepUploadsOnce(ctx, time.Now()); err != nil && ctx.Err() == nil {
			s.log.Warn().Err(err).Msg("upload sweep")
		}
	}
	pass(ctx)
	ops.Every(ctx, uploadSweepEvery, pass)
	return nil
}

// sweepUploadsOnce removes, as of now, the uploads a task took and those
// past their deadline, skipping any a request is taking (its lock is
// held); it returns the keys it removed with the reason.
func (s *server) sweepUploadsOnce(ctx context.Context, now time.Time) (map[string]string, error) {
	objs, err := s.objects.List(ctx, uploadPrefix, uploadSweepMax)
	if err != nil {
		return nil, fmt.Errorf("upload sweep: %w", err)
	}
	if len(objs) == uploadSweepMax {
		s.log.Warn().Int("max", uploadSweepMax).Msg("upload sweep: more uploads than one pass looks at")
	}
	ids := make([]uuid.UUID, len(objs))
	for i, o := range objs {
		ids[i], _, _ = taskOfUploadKey(o.Key) // uuid.Nil: not an upload's key, judged by age alone
	}
	taken, err := s.tasksAmong(ctx, ids)
	if err != nil {
		return nil, err
	}
	removed := map[string]string{}
	for i, o := range objs {
		reason := ""
		switch {
		case ids[i] != uuid.Nil && taken[ids[i]]:
			reason = dropTaken
		case now.Sub(o.Modified) > s.uploadDeadline():
			reason = dropExpired
		default:
			continue
		}
		if s.dropUnlessTaking(ctx, ids[i], o.Key, reason) {
			removed[o.Key] = reason
		}
	}
	return removed, nil
}

// dropUnlessTaking removes the upload at key unless a request holds its
// lock (it is taking it); it reports whether it removed it.
func (s *server) dropUnlessTaking(ctx context.Context, id uuid.UUID, key, reason string) bool {
	if id != uuid.Nil {
		unlock, err := s.lockUpload(ctx, id)
		if err != nil {
			return false // being taken, or the database is away: the next pass sees it again
		}
		defer unlock()
	}
	return s.dropUpload(ctx, key, reason)
}

// tasksAmong returns which of ids are tasks.
func (s *server) tasksAmong(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]bool, error) {
	rows, err := s.pool.Query(ctx, `SELECT id FROM tasks WHERE id = ANY($1)`, ids)
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

// defaultUploadType is the content type of an upload whose client names
// none.
const defaultUploadType = "video/mp4"

// uploadContentType checks the content type a client announces for its
// upload (the policy holds the store to it): a video type, without
// parameters.
func uploadContentType(ct string) (string, error) {
	if ct == "" {
		return defaultUploadType, nil
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || len(params) != 0 || !strings.HasPrefix(mt, "video/") {
		return "", apierr.BadRequest(fmt.Sprintf("contentType %q: want a video type such as video/mp4", apierr.CutEcho(ct)))
	}
	return mt, nil
}
