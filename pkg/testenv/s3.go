package testenv

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Local stack defaults for S3-compatible storage (MinIO).
const (
	DefaultS3Endpoint  = "localhost:9000"
	DefaultS3AccessKey = "minioadmin"
	DefaultS3SecretKey = "minioadmin"
)

// Bucket is a fresh bucket for one test, with the settings a service needs
// to reach it and a client already connected.
type Bucket struct {
	Endpoint  string
	AccessKey string
	SecretKey string
	UseSSL    bool
	Name      string
	Client    *minio.Client
}

// S3 creates a fresh bucket on S3_ENDPOINT (with S3_ACCESS_KEY,
// S3_SECRET_KEY and S3_USE_SSL, local MinIO defaults otherwise) and removes
// it, with every object in it, when the test ends.
func S3(t testing.TB) *Bucket {
	t.Helper()
	b := &Bucket{
		Endpoint:  Env("S3_ENDPOINT", DefaultS3Endpoint),
		AccessKey: Env("S3_ACCESS_KEY", DefaultS3AccessKey),
		SecretKey: Env("S3_SECRET_KEY", DefaultS3SecretKey),
		Name:      "dubflow-test-" + strings.ReplaceAll(uuid.NewString()[:18], "-", ""),
	}
	if v := Env("S3_USE_SSL", "false"); v != "" {
		ssl, err := strconv.ParseBool(v)
		if err != nil {
			t.Fatalf("testenv: parse S3_USE_SSL %q: %v", v, err)
		}
		b.UseSSL = ssl
	}
	client, err := minio.New(b.Endpoint, &minio.Options{
		Creds:  credentials.NewStaticV4(b.AccessKey, b.SecretKey, ""),
		Secure: b.UseSSL,
	})
	if err != nil {
		t.Fatalf("testenv: s3 client for %s: %v", b.Endpoint, err)
	}
	b.Client = client
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := client.MakeBucket(ctx, b.Name, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("testenv: create bucket %s on %s (is the local stack up? run `scripts/stack.sh up --infra-only`): %v", b.Name, b.Endpoint, err)
	}
	t.Cleanup(func() {
		tidying.tidy(t, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if err := b.remove(ctx); err != nil {
				return fmt.Errorf("testenv: %w", err)
			}
			return nil
		})
	})
	return b
}

// remove deletes every object of the bucket, then the bucket.
func (b *Bucket) remove(ctx context.Context) error {
	objects := b.Client.ListObjects(ctx, b.Name, minio.ListObjectsOptions{Recursive: true, WithVersions: true})
	for res := range b.Client.RemoveObjects(ctx, b.Name, objects, minio.RemoveObjectsOptions{}) {
		if res.Err != nil {
			return fmt.Errorf("remove object %s from %s: %w", res.ObjectName, b.Name, res.Err)
		}
	}
	if err := b.Client.RemoveBucket(ctx, b.Name); err != nil {
		return fmt.Errorf("remove bucket %s: %w", b.Name, err)
	}
	return nil
}
