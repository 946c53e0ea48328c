package blob_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/blob/blobtest"
	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/testenv"
)

// TestGetFileEnforcesTheLimitWhileReading downloads an object larger than
// the limit through storage that tells the truth, through one whose stat
// claims one byte, and through one that hides every length: each download
// stops with ErrTooLarge and leaves no file, partial or whole.
func TestGetFileEnforcesTheLimitWhileReading(t *testing.T) {
	t.Parallel()
	b := testenv.S3(t)
	data := bytes.Repeat([]byte("x"), 300<<10)
	ctx := context.Background()
	src := filepath.Join(t.TempDir(), "big.bin")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	truthful := store(t, b, b.Endpoint)
	if err := truthful.PutFile(ctx, "videos/x/source.mp4", src, "video/mp4"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		store *blob.Store
	}{
		{"truthful storage", truthful},
		{"stat claims one byte", store(t, b, blobtest.LyingProxy(t, b.Endpoint, blobtest.SmallStat))},
		{"no length anywhere", store(t, b, blobtest.LyingProxy(t, b.Endpoint, blobtest.NoLength))},
	} {
		t.Run(c.name, func(t *testing.T) {
			if info, err := c.store.Stat(ctx, "videos/x/source.mp4"); err != nil {
				t.Fatal(err)
			} else {
				t.Logf("stat says %d bytes", info.Size)
			}
			dir := t.TempDir()
			err := c.store.GetFile(ctx, "videos/x/source.mp4", filepath.Join(dir, "source.media"), 100<<10)
			if !errors.Is(err, blob.ErrTooLarge) {
				t.Fatalf("download over the limit: %v, want ErrTooLarge", err)
			}
			if left, _ := os.ReadDir(dir); len(left) != 0 {
				t.Errorf("files left behind: %v", left)
			}
			// Within the limit the same storage delivers the whole object.
			out := filepath.Join(dir, "ok.media")
			if err := c.store.GetFile(ctx, "videos/x/source.mp4", out, int64(len(data))); err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(out); !bytes.Equal(got, data) {
				t.Errorf("downloaded %d bytes, want the %d stored", len(got), len(data))
			}
		})
	}
}

func store(t *testing.T, b *testenv.Bucket, endpoint string) *blob.Store {
	t.Helper()
	s, err := blob.New(config.S3{Endpoint: endpoint, AccessKey: b.AccessKey, SecretKey: b.SecretKey, Bucket: b.Name, UseSSL: b.UseSSL})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
