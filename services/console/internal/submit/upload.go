package submit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/dubflow/dubflow/pkg/admit"
	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/dubflow/dubflow/services/console/internal/jsonbody"
	"github.com/dubflow/dubflow/services/console/internal/route"
	"github.com/dubflow/dubflow/services/console/internal/uploads"
	"github.com/google/uuid"
)

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
