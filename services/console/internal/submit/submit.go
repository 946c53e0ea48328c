// Package submit is how a task starts from the API: a video posted with
// its form (multipart) or uploaded first through a presigned POST policy
// (POST /api/uploads, then POST /api/tasks with its key: internal/uploads)
// goes through pkg/admit — the same checks and texts as dubctl — and the
// task with its first message is created as dubctl submit creates it.
// POST /api/tasks runs at most once per principal and Idempotency-Key
// (internal/idempotent).
package submit

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/admit"
	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/tenant"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/dubflow/dubflow/services/console/internal/contract"
	"github.com/dubflow/dubflow/services/console/internal/idempotent"
	"github.com/dubflow/dubflow/services/console/internal/jsonbody"
	"github.com/dubflow/dubflow/services/console/internal/route"
	"github.com/dubflow/dubflow/services/console/internal/uploads"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
)

// Room serves the routes that start tasks.
type Room struct {
	Pool    *pgxpool.Pool
	Objects *blob.Store
	// Signer presigns the upload policies browsers post to.
	Signer *blob.Presigner
	Pub    outbox.Publisher
	Log    zerolog.Logger
	// Limits are MAX_VIDEO_BYTES and MAX_VIDEO_SECONDS.
	Limits config.Limits
	// DefaultSource and DefaultTarget are the languages of a task that
	// names none (DEFAULT_SOURCE_LANGUAGE, DEFAULT_TARGET_LANGUAGE).
	DefaultSource, DefaultTarget string
	// LinkExpiry is CONSOLE_PRESIGN_SECONDS, which bounds an upload URL's
	// lifetime (with maxUploadSeconds).
	LinkExpiry time.Duration
	Fail       route.Fail
}

// Routes are POST /api/uploads and POST /api/tasks (audited, and at most
// once per principal and Idempotency-Key).
func (s Room) Routes() []route.Route {
	return []route.Route{
		{Method: "POST", Path: "/api/uploads", Access: route.Admin, Handle: s.createUpload},
		{Method: "POST", Path: "/api/tasks", Access: route.Admin, Audit: "submit", Handle: s.Idempotency().Wrap(s.createTask)},
	}
}

// Idempotency is the room's Idempotency-Key guard (internal/idempotent).
func (s Room) Idempotency() idempotent.Guard {
	return idempotent.Guard{Pool: s.Pool, Log: s.Log, Fail: s.Fail,
		Who: func(r *http.Request) string { return route.PrincipalOf(r).Name },
		TaskOfUpload: func(key string) uuid.UUID {
			id, _, _ := uploads.TaskOf(key)
			return id
		},
		FormError: func(err error) error { return formError(err, s.Limits.MaxVideoBytes) }}
}

// BodyLimit bounds the body of a request of op: MAX_VIDEO_BYTES and the
// form's fields for a multipart upload, the text fields' bounds for a
// task's JSON (MaxTaskJSONBytes), 1 MiB for anything else.
func (s Room) BodyLimit(op *contract.Op, r *http.Request) int64 {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt == "multipart/form-data" && op != nil && slices.Contains(op.BodyTypes, mt) {
		return s.Limits.MaxVideoBytes + 4*maxFieldBytes
	}
	if r.Method == http.MethodPost && r.URL.Path == "/api/tasks" {
		return MaxTaskJSONBytes
	}
	return jsonbody.MaxBytes
}

// maxFieldBytes bounds a form field other than the video (the glossary,
// a subtitle file).
const maxFieldBytes = max(admit.MaxGlossaryBytes, admit.MaxSubtitlesBytes)

// MaxTaskJSONBytes bounds the JSON body of POST /api/tasks: its text
// fields (the glossary, two subtitle files) at their bounds.
const MaxTaskJSONBytes = 4 * maxFieldBytes

// maxUploadSeconds bounds the lifetime of a presigned upload URL, whatever
// CONSOLE_PRESIGN_SECONDS says: the URL is a bearer credential for one
// upload.
const maxUploadSeconds = 15 * 60

// submission is a task to create.
type submission struct {
	id   uuid.UUID
	task admit.Task
	// sourceVideoKey is where the task's video is stored:
	// videos/{id}/source.mp4.
	sourceVideoKey string
	// probe is the record of the video's check (admit.ProbeRecord; nil
	// without one), stored with the task for extract_audio to reuse.
	probe []byte
	// project owns the task (pkg/tenant).
	project string
}

// Created is what POST /api/tasks answers.
type Created struct {
	TaskID         uuid.UUID `json:"taskId"`
	Status         string    `json:"status"`
	SourceVideoKey string    `json:"sourceVideoKey"`
	// TargetLanguages are the languages of a parent task (several targets).
	TargetLanguages []string `json:"targetLanguages,omitempty"`
}

// createTask starts a task from an upload (multipart) or from an object
// uploaded through a presigned URL (JSON). Both go through pkg/admit
// before anything is stored: the same input is refused with the same text
// as dubctl refuses it, and a refused request leaves no task, object or
// message behind.
func (s Room) createTask(w http.ResponseWriter, r *http.Request) {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var sub submission
	var err error
	switch mt {
	case "multipart/form-data":
		sub, err = s.receiveUpload(w, r)
	case "application/json":
		sub, err = s.existingUpload(r)
	default:
		err = apierr.UnsupportedMediaType("want multipart/form-data (field video) or application/json ({sourceVideoKey})")
	}
	if err != nil {
		s.Fail(w, r, Refusal(err))
		return
	}
	c := Created{TaskID: sub.id, Status: task.Queued, SourceVideoKey: sub.sourceVideoKey}
	if len(sub.task.Targets) > 1 {
		c.TargetLanguages = sub.task.Targets
	}
	route.JSON(w, http.StatusCreated, c)
}

// Refusal answers an admission's refusal with its status and its text.
func Refusal(err error) error {
	e, ok := admit.As(err)
	if !ok {
		return err
	}
	switch e.Kind {
	case admit.TooLarge:
		return apierr.TooLarge(e.Error())
	case admit.Unavailable:
		return apierr.Unavailable(e.Error())
	}
	return apierr.BadRequest(e.Error())
}

// admit checks a request's fields against the engines' capabilities.
func (s Room) admit(ctx context.Context, req admit.Request) (admit.Task, error) {
	caps, err := admit.LoadCapabilities(ctx, s.Pool)
	if err != nil {
		return admit.Task{}, apierr.UnavailableBecause("the engines' capabilities cannot be read now; try again", err)
	}
	return admit.Check(req, admit.Rules{DefaultSource: s.DefaultSource,
		DefaultTarget: s.DefaultTarget, Capabilities: caps})
}

// MediaLimits are the media limits of an upload.
func (s Room) MediaLimits() admit.Limits {
	return admit.Limits{MaxBytes: s.Limits.MaxVideoBytes, MaxSeconds: s.Limits.MaxVideoSeconds}
}

// submitProject is the project a task submitted by r belongs to: a
// project's token's own (asking for another is as asking for none that
// exists), else the one asked for, which must exist, else the default.
func (s Room) submitProject(r *http.Request, asked string) (string, error) {
	mine := route.ProjectOf(r)
	switch {
	case mine != "" && (asked == "" || asked == mine):
		return mine, nil
	case asked == "":
		return tenant.Default, nil
	}
	ok := false
	if mine == "" {
		var err error
		if ok, err = tenant.Exists(r.Context(), s.Pool, asked); err != nil {
			return "", apierr.UnavailableBecause("the projects cannot be read now; try again", err)
		}
	}
	if !ok {
		return "", apierr.BadRequest(fmt.Sprintf("project %q: no such project", apierr.Short(asked)))
	}
	return asked, nil
}

// submit stores the task's subtitle files, creates the task and publishes
// its first message, exactly as dubctl submit does (the admitted task's
// payload, glossary included, in task.SubmitProbed's own transaction, which
// rides over a database failover; then outbox.Flush, a failed publish left
// to the workers' outbox sweep). extract_audio stores the glossary in
// task_glossaries.
func (s Room) submit(ctx context.Context, sub submission) error {
	payload := sub.task.Payload(sub.id)
	payload.Project = sub.project
	env, err := wire.New(wire.StepExtractAudio, sub.id, "", payload)
	if err != nil {
		return apierr.BadRequest(err.Error())
	}
	for _, f := range sub.task.SubtitleFiles(sub.id) {
		if err := s.Objects.Put(ctx, f.Key, strings.NewReader(f.Text), int64(len(f.Text)), f.ContentType); err != nil {
			return apierr.UnavailableBecause("the subtitles cannot be stored now; try again", err)
		}
	}
	// Not in outbox.Commit: a submission commits in a transaction of its
	// own, which rides over a database failover (task.SubmitProbed).
	ids, err := task.SubmitProbed(ctx, s.Pool, env, payload, sub.task.FileName, sub.probe)
	if errors.Is(err, task.ErrExists) {
		return apierr.Conflict(fmt.Sprintf("task %s exists already", sub.id))
	}
	if err != nil {
		return err
	}
	if err := outbox.Flush(ctx, s.Pool, s.Pub, ids); err != nil {
		s.Log.Warn().Err(err).Str("task_id", sub.id.String()).Msg("publish deferred to the outbox sweep")
	}
	return nil
}
