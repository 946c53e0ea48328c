package tasks

import (
	"errors"
	"net/http"
	"path"
	"regexp"
	"strings"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/stream"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
)

// A long task's growing stream (pkg/stream) is served here, to whoever may
// read the task, like its other files: the multivariant playlist at
// /api/tasks/{id}/stream.m3u8, and beside it, under stream/, its media
// playlists (written from the database on every request: a player that
// reloads sees the stream grow, and a task that ended, however, shows
// #EXT-X-ENDLIST) and its stored pieces, init segments and subtitles.

// StreamPath is where the console serves a task's stream, after
// /api/tasks/{id}.
const StreamPath = "/stream.m3u8"

// streamFileName is a file of a stream's folder: the names mux_video
// writes (init.mp4, b000013460-000.m4s, v2-b000013460.vtt, video-v2.m3u8).
var streamFileName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,120}$`)

// streamOf loads the requested task's stream; it answers 404 itself when
// the task has none yet.
func (s Room) streamOf(w http.ResponseWriter, r *http.Request) (*view.Task, *stream.State, bool) {
	d, ok := s.requestedDetail(w, r)
	if !ok {
		return nil, nil, false
	}
	st, err := stream.Load(r.Context(), s.Pool, d.TaskID)
	if err == nil && st.Init.Key == "" {
		err = stream.ErrNone
	}
	if errors.Is(err, stream.ErrNone) {
		s.Fail(w, r, apierr.NotFound("this task has no stream (yet): a long task gains one as its first stretch is dubbed"))
		return nil, nil, false
	}
	if err != nil {
		s.Fail(w, r, err)
		return nil, nil, false
	}
	return d, st, true
}

// streamMaster answers GET /api/tasks/{id}/stream.m3u8: the multivariant
// playlist, naming the media playlists of the version the stream shows.
func (s Room) streamMaster(w http.ResponseWriter, r *http.Request) {
	d, st, ok := s.streamOf(w, r)
	if !ok {
		return
	}
	n := stream.Relative(st.Folder(), st.Version)
	n.Video, n.Subtitles = "stream/"+n.Video, "stream/"+n.Subtitles
	playlist(w, stream.Master(n, st.Init.Codecs, d.TargetLanguage))
}

// streamFile answers GET /api/tasks/{id}/stream/{file}: a media playlist
// of the stream as recorded now, or one of its stored files.
func (s Room) streamFile(w http.ResponseWriter, r *http.Request) {
	d, st, ok := s.streamOf(w, r)
	if !ok {
		return
	}
	name := r.PathValue("file")
	if !streamFileName.MatchString(name) || strings.Contains(name, "..") {
		s.Fail(w, r, apierr.NotFound("no such file in the task's stream"))
		return
	}
	dir := st.Folder()
	n := stream.Relative(dir, st.Version)
	ended := st.Ended || view.Ended(d.Status)
	switch {
	case strings.HasPrefix(name, "video") && strings.HasSuffix(name, ".m3u8"):
		playlist(w, stream.Video(st, n, ended))
		return
	case strings.HasPrefix(name, "subtitles") && strings.HasSuffix(name, ".m3u8"):
		playlist(w, stream.Subtitles(st, n, ended))
		return
	}
	s.serveStreamObject(w, r, dir+name)
}

// serveStreamObject streams one stored file of a stream.
func (s Room) serveStreamObject(w http.ResponseWriter, r *http.Request, key string) {
	obj, info, err := s.Objects.Open(r.Context(), key)
	switch {
	case errors.Is(err, blob.ErrNotFound):
		s.Fail(w, r, apierr.NotFound("no such file in the task's stream"))
		return
	case err != nil:
		s.Log.Warn().Err(err).Str("key", key).Msg("open a stream file")
		s.Fail(w, r, apierr.Unavailable("object store: the file cannot be read now"))
		return
	}
	defer obj.Close()
	w.Header().Set("Content-Type", streamType(path.Ext(key)))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	// Pieces never change once listed (a re-dub writes new ones).
	w.Header().Set("Cache-Control", "private, max-age=86400")
	http.ServeContent(w, r, path.Base(key), info.Modified, obj)
}

// streamType is the media type of a stream's file by its extension.
func streamType(ext string) string {
	switch ext {
	case ".m4s":
		return "video/iso.segment"
	case ".vtt":
		return "text/vtt; charset=utf-8"
	}
	return "video/mp4"
}

// playlist answers an HLS playlist, never cached: it grows.
func playlist(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", stream.ContentType)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(body))
}
