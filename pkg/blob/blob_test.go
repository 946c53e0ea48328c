package blob_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/testenv"
)

func newStore(t *testing.T) *blob.Store {
	t.Helper()
	b := testenv.S3(t)
	s, err := blob.New(config.S3{Endpoint: b.Endpoint, AccessKey: b.AccessKey, SecretKey: b.SecretKey, Bucket: b.Name, UseSSL: b.UseSSL})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStoreRoundTripsFilesAndBytes(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	if err := s.EnsureBucket(ctx); err != nil {
		t.Fatalf("ensure existing bucket: %v", err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "in.bin")
	data := bytes.Repeat([]byte("dub"), 1000)
	os.WriteFile(src, data, 0o644)
	if err := s.PutFile(ctx, "videos/x/source.mp4", src, "video/mp4"); err != nil {
		t.Fatal(err)
	}
	info, err := s.Stat(ctx, "videos/x/source.mp4")
	if err != nil || info.Size != int64(len(data)) || info.ContentType != "video/mp4" {
		t.Fatalf("stat = %+v, %v", info, err)
	}
	dst := filepath.Join(t.TempDir(), "out.bin")
	if err := s.GetFile(ctx, "videos/x/source.mp4", dst, 1<<20); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, data) {
		t.Fatal("downloaded file differs")
	}
	if err := s.GetFile(ctx, "videos/x/source.mp4", dst, 100); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("oversized download: %v, want a limit error", err)
	}
	if err := s.Put(ctx, "asr/x/asr.json", strings.NewReader(`{"segments":[]}`), -1, "application/json"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, "asr/x/asr.json", 1024); err != nil || string(got) != `{"segments":[]}` {
		t.Fatalf("get = %q, %v", got, err)
	}
	if _, err := s.Get(ctx, "asr/x/asr.json", 4); err == nil {
		t.Fatal("get over the limit succeeded")
	}
	if err := s.Remove(ctx, "asr/x/asr.json"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Stat(ctx, "asr/x/asr.json"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("stat of a removed object: %v, want ErrNotFound", err)
	}
	if err := s.GetFile(ctx, "videos/missing.mp4", dst, 0); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("download of a missing object: %v, want ErrNotFound", err)
	}
}
