package browsertest

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

// TestLargeUploadGoesStraightToStorage: the page sends a video over its
// 32 MiB threshold to the object store itself, with the presigned POST
// policy of POST /api/uploads signed by the presign user, then starts the
// task from it: the task holds the very bytes chosen, the upload is gone,
// and the page raised no error (the Content-Security-Policy lets it post
// to the store, whose answer CORS lets it read).
func TestLargeUploadGoesStraightToStorage(t *testing.T) {
	needBrowser(t)
	video := largeVideo(t)
	s := newStackOf(t, nil, nil)
	b3 := s.bucket
	s3 := config.S3{Endpoint: b3.Endpoint, AccessKey: b3.AccessKey, SecretKey: b3.SecretKey, Bucket: b3.Name, UseSSL: b3.UseSSL}
	p := testenv.PresignUser(t, s3)
	s.start(t, "console", map[string]string{"CONSOLE_HTTP_ADDR": strings.TrimPrefix(s.console, "http://"),
		"DUBFLOW_API_TOKEN": s.token, "S3_PRESIGN_ACCESS_KEY": p.AccessKey, "S3_PRESIGN_SECRET_KEY": p.SecretKey})
	b := newBrowser(t, s.console)
	b.login(s.token)
	id := b.upload(video, "")
	b.shot("large-upload-task")

	store := b3.Store(t)
	ctx := context.Background()
	want, err := os.ReadFile(video)
	if err != nil {
		t.Fatal(err)
	}
	got, err := store.Get(ctx, wire.DefaultKeys(uuid.MustParse(id)).SourceVideo, int64(len(want))+1)
	if err != nil || len(got) != len(want) || string(got) != string(want) {
		t.Fatalf("the task's video: %d bytes, %v; want the %d bytes chosen", len(got), err, len(want))
	}
	if _, err := store.Stat(ctx, "uploads/"+id+"/source.mp4"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("the upload is still there after the task took it: %v", err)
	}
	var d struct {
		FileName string `json:"fileName"`
	}
	s.call(t, "GET", "/api/tasks/"+id, "", nil, http.StatusOK, &d)
	if d.FileName != filepath.Base(video) {
		t.Fatalf("file name %q, want %q", d.FileName, filepath.Base(video))
	}
	b.checkNoPageErrors()
}

// largeVideo makes a valid video of more than the page's 32 MiB threshold
// quickly: one second of raw 720p frames and a tone, in Matroska.
func largeVideo(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "large.mkv")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ffmpeg", "-nostdin", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc=s=1280x720:r=25:d=1",
		"-f", "lavfi", "-i", "sine=d=1", "-c:v", "rawvideo", "-pix_fmt", "yuv420p", "-c:a", "pcm_s16le", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make the large video: %v\n%s", err, b)
	}
	if st, err := os.Stat(out); err != nil || st.Size() <= 32<<20 {
		t.Fatalf("large video: %v, %v; want more than 32 MiB", st, err)
	}
	return out
}
