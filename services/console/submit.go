package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

// maxFieldBytes bounds a form field other than the video (the glossary).
const maxFieldBytes = 1 << 20

// probeTimeout bounds the ffprobe check of an upload.
const probeTimeout = time.Minute

var languagePattern = regexp.MustCompile(`^[a-z]{2,3}([-_][A-Za-z0-9]{2,8})?$`)

// submission is a task to create.
type submission struct {
	id                       uuid.UUID
	source, target, speaker  string
	sourceVideoKey, glossary string
	// targets are the languages to dub into: one, or several (a parent
	// task with one child task per language).
	targets []string
}

// created is what POST /api/tasks answers.
type created struct {
	TaskID         uuid.UUID `json:"taskId"`
	Status         string    `json:"status"`
	SourceVideoKey string    `json:"sourceVideoKey"`
	// TargetLanguages are the languages of a parent task (several targets).
	TargetLanguages []string `json:"targetLanguages,omitempty"`
}

// createTask starts a task from an upload (multipart) or from an object
// uploaded through a presigned URL (JSON).
func (s *server) createTask(w http.ResponseWriter, r *http.Request) {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var sub submission
	var err error
	switch mt {
	case "multipart/form-data":
		sub, err = s.receiveUpload(w, r)
	case "application/json":
		sub, err = s.existingUpload(r)
	default:
		err = badRequest("want multipart/form-data (field video) or application/json ({sourceVideoKey})")
	}
	if err == nil {
		err = s.submit(r.Context(), sub)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	c := created{TaskID: sub.id, Status: task.Queued, SourceVideoKey: sub.sourceVideoKey}
	if len(sub.targets) > 1 {
		c.TargetLanguages = sub.targets
	}
	writeJSON(w, http.StatusCreated, c)
}

// receiveUpload streams the multipart form's video to a temporary file
// (never whole in memory), refusing it past MAX_VIDEO_BYTES, checks it with
// ffprobe (an audio and a video stream, at most MAX_VIDEO_SECONDS) and
// stores it at videos/{taskId}/source.mp4.
func (s *server) receiveUpload(w http.ResponseWriter, r *http.Request) (submission, error) {
	sub := submission{id: uuid.New()}
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.Limits.MaxVideoBytes+4*maxFieldBytes)
	mr, err := r.MultipartReader()
	if err != nil {
		return sub, badRequest("multipart form: " + err.Error())
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
		return sub, badRequest("multipart form: the file field video is required")
	}
	sub.source, sub.target, sub.speaker, sub.glossary = fields["source"], fields["target"], fields["speaker"], fields["glossary"]
	if err := s.checkFields(&sub); err != nil {
		return sub, err
	}
	if err := s.probe(r.Context(), path); err != nil {
		return sub, err
	}
	sub.sourceVideoKey = wire.DefaultKeys(sub.id).SourceVideo
	if err := s.objects.PutFile(r.Context(), sub.sourceVideoKey, path, "video/mp4"); err != nil {
		return sub, unavailable("store the video: " + err.Error())
	}
	return sub, nil
}

// readForm reads the form's parts: the video into path, the other fields
// into the map.
func (s *server) readForm(mr *multipart.Reader, path string) (map[string]string, bool, error) {
	fields := map[string]string{}
	gotVideo := false
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return fields, gotVideo, nil
		}
		if err != nil {
			return nil, false, formError(err, s.cfg.Limits.MaxVideoBytes)
		}
		name := part.FormName()
		switch {
		case name == "video" && !gotVideo:
			if err := s.saveVideo(part, path); err != nil {
				return nil, false, err
			}
			gotVideo = true
		case name == "source" || name == "target" || name == "speaker" || name == "glossary":
			b, err := io.ReadAll(io.LimitReader(part, maxFieldBytes+1))
			if err != nil {
				return nil, false, formError(err, s.cfg.Limits.MaxVideoBytes)
			}
			if len(b) > maxFieldBytes {
				return nil, false, tooLarge(fmt.Sprintf("field %s: more than %d bytes", name, maxFieldBytes))
			}
			v := strings.TrimSpace(string(b))
			if name == "target" && fields[name] != "" {
				v = fields[name] + "," + v // repeated: several languages
			}
			fields[name] = v
		default:
			return nil, false, badRequest(fmt.Sprintf("multipart form: unknown field %q (want video, source, target, speaker, glossary)", name))
		}
	}
}

// saveVideo copies the video part to path, at most MAX_VIDEO_BYTES.
func (s *server) saveVideo(part io.Reader, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	limit := s.cfg.Limits.MaxVideoBytes
	n, err := io.Copy(f, io.LimitReader(part, limit+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return formError(err, limit)
	}
	if n > limit {
		return tooLarge(fmt.Sprintf("video: more than %d bytes (MAX_VIDEO_BYTES=%d)", limit, limit))
	}
	if n == 0 {
		return badRequest("video: empty file")
	}
	return nil
}

// formError names a body cut off at the size limit as such.
func formError(err error, limit int64) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return tooLarge(fmt.Sprintf("request body over the limit (MAX_VIDEO_BYTES=%d)", limit))
	}
	return badRequest("multipart form: " + err.Error())
}

// checkFields fills in default languages and checks the fields.
func (s *server) checkFields(sub *submission) error {
	if sub.source == "" {
		sub.source = s.cfg.DefaultSourceLanguage
	}
	if !languagePattern.MatchString(sub.source) {
		return badRequest(fmt.Sprintf("source %q: want a language code such as en or es", sub.source))
	}
	values := append([]string{sub.target}, sub.targets...)
	targets, err := parseTargets(values, s.cfg.DefaultTargetLanguage)
	if err != nil {
		return err
	}
	sub.targets, sub.target = targets, targets[0]
	for _, t := range targets {
		if t == sub.source {
			return badRequest("source and target are the same language")
		}
	}
	if len(sub.speaker) > 200 || strings.ContainsAny(sub.speaker, "\x00\n\r") {
		return badRequest("speaker: at most 200 characters on one line")
	}
	return nil
}

// probe checks the upload with ffprobe: media with an audio and a video
// stream, not longer than MAX_VIDEO_SECONDS.
func (s *server) probe(ctx context.Context, path string) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	_, err := media.ProbeInput(ctx, path, media.Limits{RequireAudio: true, RequireVideo: true,
		MaxDuration: s.cfg.Limits.MaxDuration()})
	switch {
	case errors.Is(err, media.ErrTooLong):
		return tooLarge(fmt.Sprintf("video: %v (MAX_VIDEO_SECONDS=%d)", err, s.cfg.Limits.MaxVideoSeconds))
	case err != nil:
		return badRequest("video: " + strings.ReplaceAll(err.Error(), path, "upload"))
	}
	return nil
}

// existingUpload reads {"sourceVideoKey", "source", "target", "speaker"}
// for an object uploaded through POST /api/uploads.
func (s *server) existingUpload(r *http.Request) (submission, error) {
	var body struct {
		SourceVideoKey string `json:"sourceVideoKey"`
		Source         string `json:"source"`
		Target         string `json:"target"`
		// TargetLanguages names several languages (as does a target
		// such as "es,ca").
		TargetLanguages []string `json:"targetLanguages"`
		Speaker         string   `json:"speaker"`
		Glossary        string   `json:"glossary"`
	}
	if err := decodeJSON(r, &body); err != nil {
		return submission{}, err
	}
	id, err := taskOfVideoKey(body.SourceVideoKey)
	if err != nil {
		return submission{}, err
	}
	sub := submission{id: id, source: body.Source, target: body.Target, speaker: body.Speaker,
		glossary: body.Glossary, sourceVideoKey: body.SourceVideoKey, targets: body.TargetLanguages}
	if err := s.checkFields(&sub); err != nil {
		return sub, err
	}
	info, err := s.objects.Stat(r.Context(), sub.sourceVideoKey)
	if errors.Is(err, blob.ErrNotFound) {
		return sub, badRequest(fmt.Sprintf("sourceVideoKey %s: nothing uploaded there (PUT the file to the uploadUrl first)", sub.sourceVideoKey))
	}
	if err != nil {
		return sub, unavailable("object store: " + err.Error())
	}
	if info.Size > s.cfg.Limits.MaxVideoBytes {
		return sub, tooLarge(fmt.Sprintf("video: %d bytes (MAX_VIDEO_BYTES=%d)", info.Size, s.cfg.Limits.MaxVideoBytes))
	}
	return sub, nil
}

// taskOfVideoKey returns the task id of a key videos/{taskId}/source.mp4.
func taskOfVideoKey(key string) (uuid.UUID, error) {
	parts := strings.Split(key, "/")
	if len(parts) != 3 {
		return uuid.Nil, badRequest("sourceVideoKey: want videos/{taskId}/source.mp4 from POST /api/uploads")
	}
	id, err := uuid.Parse(parts[1])
	if err != nil || key != wire.DefaultKeys(id).SourceVideo {
		return uuid.Nil, badRequest("sourceVideoKey: want videos/{taskId}/source.mp4 from POST /api/uploads")
	}
	return id, nil
}

// submit stores the glossary, creates the task and publishes its first
// message, exactly as dubctl submit does (task.Submit, then outbox.Flush;
// a failed publish is left to the workers' outbox sweep).
func (s *server) submit(ctx context.Context, sub submission) error {
	if sub.glossary != "" {
		key := wire.KindVideo + "/" + sub.id.String() + "/glossary.txt"
		if err := s.objects.Put(ctx, key, strings.NewReader(sub.glossary), int64(len(sub.glossary)), "text/plain"); err != nil {
			return unavailable("store the glossary: " + err.Error())
		}
	}
	payload := wire.ExtractAudio{SourceVideoKey: sub.sourceVideoKey, OutputAudioKey: wire.DefaultKeys(sub.id).SourceAudio,
		SourceLanguage: sub.source, TargetLanguage: sub.target, SpeakerID: sub.speaker}
	if len(sub.targets) > 1 {
		payload.TargetLanguages = sub.targets
	}
	env, err := wire.New(wire.StepExtractAudio, sub.id, "", payload)
	if err != nil {
		return badRequest(err.Error())
	}
	ids, err := task.Submit(ctx, s.pool, env, payload)
	if errors.Is(err, task.ErrExists) {
		return conflict(fmt.Sprintf("task %s exists already", sub.id))
	}
	if err != nil {
		return err
	}
	if err := outbox.Flush(ctx, s.pool, s.pub, ids); err != nil {
		s.log.Warn().Err(err).Str("task_id", sub.id.String()).Msg("publish deferred to the outbox sweep")
	}
	return nil
}

// upload is what POST /api/uploads answers.
type upload struct {
	TaskID         uuid.UUID         `json:"taskId"`
	SourceVideoKey string            `json:"sourceVideoKey"`
	UploadURL      string            `json:"uploadUrl"`
	Method         string            `json:"method"`
	Headers        map[string]string `json:"headers"`
	ExpiresAt      time.Time         `json:"expiresAt"`
}

// createUpload reserves a task id and returns a presigned PUT URL for its
// source video; POST /api/tasks {sourceVideoKey} starts the task.
func (s *server) createUpload(w http.ResponseWriter, r *http.Request) {
	var body struct {
		ContentType string `json:"contentType"`
	}
	if err := decodeJSON(r, &body); err != nil {
		s.fail(w, r, err)
		return
	}
	id := uuid.New()
	key := wire.DefaultKeys(id).SourceVideo
	u, err := s.signer.PresignPut(r.Context(), key, s.cfg.Presign())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, upload{TaskID: id, SourceVideoKey: key, UploadURL: u.String(), Method: http.MethodPut,
		Headers: map[string]string{}, ExpiresAt: time.Now().Add(s.cfg.Presign()).UTC().Truncate(time.Second)})
}
