package tasks

import (
	"errors"
	"mime"
	"net/http"
	"path"
	"strings"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
)

// A task's source video and its dub's audio live where the presign user
// may not read (videos/, tts/: it reads outputs/ only), so no presigned
// link reaches them: the console serves them itself, to whoever may read
// the task, with range requests (a player seeks). Their links are these
// paths on the console (view.SourceVideoPath, view.DubAudioPath; view.SignLinks).

// sourceVideoKey and dubAudioKey name the object a task file route serves.
func sourceVideoKey(d *view.Task) string { return d.SourceVideoKey }
func dubAudioKey(d *view.Task) string    { return view.OutputOf(d.Result).DubAudioKey }

// serveTaskFile answers GET /api/tasks/{id}/source-video or /dub-audio:
// the object keyOf names, streamed from the store (inline, with its file
// name), 404 when the task has none (yet).
func (s Room) serveTaskFile(keyOf func(*view.Task) string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		d, ok := s.requestedDetail(w, r)
		if !ok {
			return
		}
		key := keyOf(d)
		if key == "" {
			s.Fail(w, r, apierr.NotFound("this task has no such file (yet)"))
			return
		}
		obj, info, err := s.Objects.Open(r.Context(), key)
		switch {
		case errors.Is(err, blob.ErrNotFound):
			s.Fail(w, r, apierr.NotFound("the file is no longer in storage"))
			return
		case err != nil:
			s.Log.Warn().Err(err).Str("key", key).Msg("open a task file")
			s.Fail(w, r, apierr.Unavailable("object store: the file cannot be read now"))
			return
		}
		defer obj.Close()
		name := path.Base(key)
		w.Header().Set("Content-Type", mediaType(info.ContentType, name))
		w.Header().Set("Content-Disposition", mime.FormatMediaType("inline", map[string]string{"filename": name}))
		w.Header().Set("X-Content-Type-Options", "nosniff")
		http.ServeContent(w, r, name, info.Modified, obj)
	}
}

// mediaType is the stored content type when it is audio or video, else
// the one name's extension gives (never something a browser would run).
func mediaType(stored, name string) string {
	if strings.HasPrefix(stored, "video/") || strings.HasPrefix(stored, "audio/") {
		return stored
	}
	if strings.HasSuffix(name, ".wav") {
		return "audio/wav"
	}
	return "video/mp4"
}
