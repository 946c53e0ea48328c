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
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/admit"
	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/tenant"
	"github.com/dubflow/dubflow/pkg/view"
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

// receiveUpload streams the multipart form's video to a temporary file
// (never whole in memory, at most MAX_VIDEO_BYTES), admits the fields and
// the video (pkg/admit), stores it at videos/{taskId}/source.mp4 and
// creates the task.
func (s Room) receiveUpload(w http.ResponseWriter, r *http.Request) (submission, error) {
	sub := submission{id: idempotent.TaskID(r)}
	r.Body = http.MaxBytesReader(w, r.Body, s.Limits.MaxVideoBytes+4*maxFieldBytes)
	mr, err := r.MultipartReader()
	if err != nil {
		return sub, apierr.BadRequest("multipart form: want Content-Type multipart/form-data with a boundary")
	}
	dir, err := os.MkdirTemp("", "dubflow-console-")
	if err != nil {
		return sub, fmt.Errorf("upload: %w", err)
	}
	defer os.RemoveAll(dir)
	path := dir + "/source"
	fields, gotVideo, err := s.readForm(mr, path)
	if err != nil {
		return sub, err
	}
	if !gotVideo {
		return sub, apierr.BadRequest("multipart form: the file field video is required")
	}
	req := admit.Request{Source: fields["source"], Targets: []string{fields["target"]}, Speaker: fields["speaker"],
		Glossary: fields["glossary"], FileName: fields[videoFileName], Subtitles: fields["subtitles"],
		SubtitlesLanguage: fields["subtitlesLanguage"], SourceSubtitles: fields["sourceSubtitles"], BurnSubtitles: fields["burnSubtitles"],
		Review: []string{fields["review"]}}
	if sub.task, err = s.admit(r.Context(), req); err != nil {
		return sub, err
	}
	if sub.project, err = s.submitProject(r, fields["project"]); err != nil {
		return sub, err
	}
	info, err := s.MediaLimits().Media(r.Context(), path)
	if err != nil {
		return sub, err
	}
	if err := sub.task.FitVideo(info.Duration); err != nil {
		return sub, err
	}
	sub.probe = admit.ProbeRecord(path, info)
	sub.sourceVideoKey = wire.DefaultKeys(sub.id).SourceVideo
	if err := s.Objects.PutFile(r.Context(), sub.sourceVideoKey, path, "video/mp4"); err != nil {
		return sub, apierr.UnavailableBecause("the video cannot be stored now; try again", err)
	}
	return sub, s.submit(r.Context(), sub)
}

// videoFileName keys, in readForm's fields, the file name of the video
// part (no form field has this name).
const videoFileName = "video/filename"

// readForm reads the form's parts: the video into path (its file name
// under videoFileName), the other fields into the map.
func (s Room) readForm(mr *multipart.Reader, path string) (map[string]string, bool, error) {
	fields := map[string]string{}
	gotVideo := false
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return fields, gotVideo, nil
		}
		if err != nil {
			return nil, false, formError(err, s.Limits.MaxVideoBytes)
		}
		name := part.FormName()
		switch {
		case name == "video" && !gotVideo:
			if err := s.saveVideo(part, path); err != nil {
				return nil, false, err
			}
			gotVideo, fields[videoFileName] = true, part.FileName()
		case formFields[name] != "":
			v, err := s.readField(part, name)
			if err != nil {
				return nil, false, err
			}
			if (name == "target" || name == "review") && fields[name] != "" {
				v = fields[name] + "," + v // repeated: several languages, both stages
			}
			fields[name] = v
		default:
			return nil, false, apierr.BadRequest(fmt.Sprintf("multipart form: unknown field %q (want video, %s)", name, formFieldNames))
		}
	}
}

// formFields are the form's fields besides the video, each with the name
// a refusal of its value gives (pkg/admit's field).
var formFields = map[string]string{"source": "source", "target": "target", "speaker": "speaker", "glossary": "glossary",
	"subtitles": admit.FieldSubtitles, "subtitlesLanguage": admit.FieldSubtitles, "sourceSubtitles": admit.FieldSourceSubtitles,
	"burnSubtitles": admit.FieldBurnSubtitles, "review": "review", "project": "project"}

// formFieldNames lists them for a refusal of an unknown one.
const formFieldNames = "source, target, speaker, glossary, subtitles, subtitlesLanguage, sourceSubtitles, burnSubtitles, review, project"

// readField reads a form field's value, at most maxFieldBytes; a subtitle
// file (a file part or a text field) is read as pkg/admit reads one, so
// that an empty file is refused rather than taken for none.
func (s Room) readField(part io.Reader, name string) (string, error) {
	b, err := io.ReadAll(io.LimitReader(part, maxFieldBytes+1))
	if err != nil {
		return "", formError(err, s.Limits.MaxVideoBytes)
	}
	if name == "subtitles" || name == "sourceSubtitles" {
		return admit.SubtitlesText(formFields[name], b)
	}
	if len(b) > maxFieldBytes {
		return "", apierr.TooLarge(fmt.Sprintf("%s: more than %d bytes", name, maxFieldBytes))
	}
	return string(b), nil
}

// saveVideo copies the video part to path, refusing it past
// MAX_VIDEO_BYTES (admit.Limits.Size) or empty.
func (s Room) saveVideo(part io.Reader, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	limit := s.Limits.MaxVideoBytes
	n, err := io.Copy(f, io.LimitReader(part, limit+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return formError(err, limit)
	}
	return s.MediaLimits().Size(n)
}

// formError names a body cut off at the size limit as such.
func formError(err error, limit int64) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return apierr.TooLarge(fmt.Sprintf("request body over the limit (MAX_VIDEO_BYTES=%d)", limit))
	}
	return apierr.BadRequest("multipart form: the body is not a complete multipart/form-data form")
}

// uploadedTask is the JSON body of POST /api/tasks for a video already
// posted to an upload URL (POST /api/uploads).
type uploadedTask struct {
	SourceVideoKey string `json:"sourceVideoKey"`
	Source         string `json:"source"`
	Target         string `json:"target"`
	// TargetLanguages names several languages (as does a target such as
	// "es,ca").
	TargetLanguages []string `json:"targetLanguages"`
	Speaker         string   `json:"speaker"`
	Glossary        string   `json:"glossary"`
	// FileName is the name of the file the browser or client uploaded.
	FileName string `json:"fileName"`
	// Review are the stages the task stops at for a person's edits
	// ("transcript", "translation").
	Review []string `json:"review"`
	// Subtitles is the text of a subtitle file (SRT or WebVTT) the task
	// starts from; SubtitlesLanguage its language (default the source);
	// SourceSubtitles a second file's text, with the source text of
	// subtitles in the target language; BurnSubtitles "target" or
	// "bilingual" for an extra output with subtitles drawn in.
	Subtitles         string `json:"subtitles"`
	SubtitlesLanguage string `json:"subtitlesLanguage"`
	SourceSubtitles   string `json:"sourceSubtitles"`
	BurnSubtitles     string `json:"burnSubtitles"`
}

// existingUpload starts a task from {"sourceVideoKey", "source", "target",
// "targetLanguages", "speaker", "glossary", "review"}, the key an upload of POST
// /api/uploads was posted to. It admits the fields, then — holding the
// upload's lock, so that two requests never race for it — takes the
// upload (takeUpload). A refusal of the fields leaves the upload for a
// corrected request (until the sweeper's deadline, internal/uploads); a refusal
// of the upload itself removes it at once.
func (s Room) existingUpload(r *http.Request) (submission, error) {
	var body uploadedTask
	if err := jsonbody.DecodeUpTo(r, &body, MaxTaskJSONBytes); err != nil {
		return submission{}, err
	}
	ctx := r.Context()
	id, project, err := uploads.TaskOf(body.SourceVideoKey)
	if err != nil {
		return submission{}, err
	}
	if mine := route.ProjectOf(r); mine != "" && project != mine {
		// Another project's upload is, to a project's token, no upload.
		return submission{}, apierr.BadRequest(fmt.Sprintf("sourceVideoKey %s: nothing uploaded there (POST the file to the uploadUrl first)", body.SourceVideoKey))
	}
	sub := submission{id: id, sourceVideoKey: wire.DefaultKeys(id).SourceVideo, project: project}
	req := admit.Request{Source: body.Source, Targets: append([]string{body.Target}, body.TargetLanguages...),
		Speaker: body.Speaker, Glossary: body.Glossary, FileName: body.FileName, Subtitles: body.Subtitles,
		SubtitlesLanguage: body.SubtitlesLanguage, SourceSubtitles: body.SourceSubtitles, BurnSubtitles: body.BurnSubtitles,
		Review: body.Review}
	if sub.task, err = s.admit(ctx, req); err != nil {
		return sub, err
	}
	unlock, err := s.Uploads().Lock(ctx, id)
	if err != nil {
		return sub, err
	}
	defer unlock()
	sub, err = s.takeUpload(ctx, body.SourceVideoKey, sub)
	if uploads.Refused(err) {
		s.Uploads().Drop(ctx, body.SourceVideoKey, uploads.DropRefused)
	}
	return sub, err
}

// takeUpload, under the upload's lock, downloads the upload at key,
// admits the video (the same probe as multipart), stores the probed file
// as the task's own videos/{taskId}/source.mp4, creates the task and
// removes the upload. A later POST to the upload's policy changes nothing
// the task reads, and the same upload cannot start a second task: a task
// of its id exists already (409).
func (s Room) takeUpload(ctx context.Context, key string, sub submission) (submission, error) {
	if exists, err := view.TaskExists(ctx, s.Pool, sub.id); err != nil || exists {
		if err == nil {
			err = apierr.Conflict(fmt.Sprintf("task %s exists already: an upload starts one task (POST /api/uploads for another)", sub.id))
		}
		return sub, err
	}
	dir, err := os.MkdirTemp("", "dubflow-console-")
	if err != nil {
		return sub, fmt.Errorf("upload: %w", err)
	}
	defer os.RemoveAll(dir)
	path := dir + "/source"
	if err := s.fetchUpload(ctx, key, path); err != nil {
		return sub, err
	}
	info, err := s.MediaLimits().Media(ctx, path)
	if err != nil {
		return sub, err
	}
	if err := sub.task.FitVideo(info.Duration); err != nil {
		return sub, err
	}
	sub.probe = admit.ProbeRecord(path, info)
	if err := s.Objects.PutFile(ctx, sub.sourceVideoKey, path, "video/mp4"); err != nil {
		return sub, apierr.UnavailableBecause("the object store cannot store the video now; try again", err)
	}
	if err := s.submit(ctx, sub); err != nil {
		return sub, err
	}
	s.Uploads().Drop(ctx, key, uploads.DropTaken)
	return sub, nil
}

// fetchUpload downloads the upload at key into path, at most
// MAX_VIDEO_BYTES.
func (s Room) fetchUpload(ctx context.Context, key, path string) error {
	lim := s.MediaLimits()
	info, err := s.Objects.Stat(ctx, key)
	switch {
	case errors.Is(err, blob.ErrNotFound):
		return apierr.BadRequest(fmt.Sprintf("sourceVideoKey %s: nothing uploaded there (POST the file to the uploadUrl first)", key))
	case err != nil:
		return apierr.UnavailableBecause("the object store cannot be reached now; try again", err)
	}
	if err := s.Uploads().Expired(info.Modified, time.Now()); err != nil {
		return err
	}
	if err := lim.Size(info.Size); err != nil {
		return err
	}
	err = s.Objects.GetFile(ctx, key, path, lim.MaxBytes)
	switch {
	case errors.Is(err, blob.ErrTooLarge):
		return lim.Size(lim.MaxBytes + 1)
	case errors.Is(err, blob.ErrNotFound):
		return apierr.BadRequest(fmt.Sprintf("sourceVideoKey %s: nothing uploaded there (POST the file to the uploadUrl first)", key))
	case err != nil:
		return apierr.UnavailableBecause("the upload cannot be read now; try again", err)
	}
	return nil
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

// Upload is what POST /api/uploads answers: a presigned POST policy
// (blob.Upload) for the task's video.
type Upload struct {
	TaskID         uuid.UUID `json:"taskId"`
	SourceVideoKey string    `json:"sourceVideoKey"`
	// UploadURL takes one multipart/form-data POST: Fields, then the file
	// as FileField (last).
	UploadURL string            `json:"uploadUrl"`
	Method    string            `json:"method"`
	Fields    map[string]string `json:"fields"`
	FileField string            `json:"fileField"`
	// MaxBytes and ContentType are the policy's bounds: the store refuses
	// a larger file or another type.
	MaxBytes    int64     `json:"maxBytes"`
	ContentType string    `json:"contentType"`
	ExpiresAt   time.Time `json:"expiresAt"`
}

// createUpload reserves a task id and returns a presigned POST policy,
// valid for at most 15 minutes, for its video at
// uploads/{taskId}/source.mp4: the store takes one file of 1 byte to
// MAX_VIDEO_BYTES of the content type asked for (a video type; video/mp4
// when none), under that key only. POST /api/tasks {sourceVideoKey}
// checks the upload and starts the task from its own copy (internal/uploads
// says what becomes of uploads nobody takes).
func (s Room) createUpload(w http.ResponseWriter, r *http.Request) {
	var body struct {
		ContentType string `json:"contentType"`
		// Project is the project the upload's task will belong to (an
		// admin's choice; a project's token's own).
		Project string `json:"project"`
	}
	if err := jsonbody.Decode(r, &body); err != nil {
		s.Fail(w, r, err)
		return
	}
	ct, err := uploads.ContentType(body.ContentType)
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	project, err := s.submitProject(r, body.Project)
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	id := uuid.New()
	key := uploads.Key(project, id)
	expiry := s.uploadExpiry()
	pol := blob.UploadPolicy{Key: key, Expiry: expiry, MaxBytes: s.Limits.MaxVideoBytes, ContentType: ct}
	up, err := s.Signer.PresignPost(r.Context(), pol)
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	route.JSON(w, http.StatusCreated, Upload{TaskID: id, SourceVideoKey: key, UploadURL: up.URL.String(), Method: http.MethodPost,
		Fields: up.Fields, FileField: blob.UploadFileField, MaxBytes: pol.MaxBytes, ContentType: ct,
		ExpiresAt: time.Now().Add(expiry).UTC().Truncate(time.Second)})
}

// uploadExpiry is the lifetime of an upload URL: CONSOLE_PRESIGN_SECONDS,
// at most 15 minutes.
func (s Room) uploadExpiry() time.Duration {
	return min(s.LinkExpiry, maxUploadSeconds*time.Second)
}

// Uploads are the room's presigned uploads (internal/uploads).
func (s Room) Uploads() uploads.Store {
	return uploads.Store{Pool: s.Pool, Objects: s.Objects, Log: s.Log, Expiry: s.uploadExpiry}
}
