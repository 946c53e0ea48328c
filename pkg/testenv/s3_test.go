package testenv_test

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/minio/minio-go/v7"
)

func TestS3BucketRoundTripsAndIsRemoved(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var b *testenv.Bucket
	t.Run("use", func(t *testing.T) {
		b = testenv.S3(t)
		body := []byte("dubbed audio bytes")
		if _, err := b.Client.PutObject(ctx, b.Name, "audios/t1/source.wav", bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
			t.Fatalf("put: %v", err)
		}
		obj, err := b.Client.GetObject(ctx, b.Name, "audios/t1/source.wav", minio.GetObjectOptions{})
		if err != nil {
			t.Fatalf("get: %v", err)
		}
		defer obj.Close()
		got, err := io.ReadAll(obj)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if !bytes.Equal(got, body) {
			t.Fatalf("got %q, want %q", got, body)
		}
	})
	// The subtest's cleanup removed the bucket with its object in it.
	exists, err := b.Client.BucketExists(ctx, b.Name)
	if err != nil {
		t.Fatalf("bucket exists: %v", err)
	}
	if exists {
		t.Fatalf("bucket %s still exists after cleanup", b.Name)
	}
}
