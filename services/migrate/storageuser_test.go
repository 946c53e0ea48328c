package main

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/blob/blobtest"
	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/google/uuid"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// presignUser runs migrate (S3 only) on a fresh bucket with a presign user
// of its own, removed when the test ends, and returns the bucket and the
// user.
func presignUser(t *testing.T) (*testenv.Bucket, config.S3Presign, map[string]string) {
	t.Helper()
	b := testenv.S3(t)
	p := config.S3Presign{AccessKey: "presign-" + uuid.NewString()[:8], SecretKey: uuid.NewString()}
	environ := map[string]string{"S3_ENDPOINT": b.Endpoint, "S3_ACCESS_KEY": b.AccessKey, "S3_SECRET_KEY": b.SecretKey,
		"S3_BUCKET": b.Name, "S3_USE_SSL": strconv.FormatBool(b.UseSSL),
		"S3_PRESIGN_ACCESS_KEY": p.AccessKey, "S3_PRESIGN_SECRET_KEY": p.SecretKey}
	adm, err := adminClient(config.S3{Endpoint: b.Endpoint, AccessKey: b.AccessKey, SecretKey: b.SecretKey, UseSSL: b.UseSSL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		if err := adm.RemoveUser(ctx, p.AccessKey); err != nil {
			t.Errorf("remove the test's presign user: %v", err)
		}
		if err := adm.RemoveCannedPolicy(ctx, presignPolicyName(b.Name)); err != nil {
			t.Errorf("remove the test's presign policy: %v", err)
		}
	})
	migrateS3(t, environ)
	return b, p, environ
}

// migrateS3 runs migrate's S3 part with environ.
func migrateS3(t *testing.T, environ map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, []string{"-skip-db", "-skip-amqp"}, environ); err != nil {
		t.Fatalf("migrate: %v", err)
	}
}

// TestPresignUserWritesUploadsAndReadsOutputsOnly: the user migrate
// creates may PUT under uploads/ and GET under outputs/, and nothing else:
// not read a task's video, not write an output, not list, not delete,
// not read back an upload. Its presigned URLs carry its name and reach the
// same, and no more.
func TestPresignUserWritesUploadsAndReadsOutputsOnly(t *testing.T) {
	t.Parallel()
	b, p, environ := presignUser(t)
	migrateS3(t, environ) // idempotent: a second run changes nothing
	ctx := context.Background()
	store := b.Store(t)
	if rules, err := store.Expiries(ctx); err != nil || len(rules) != 1 ||
		rules[0] != (blob.Expiry{ID: uploadsRule, Prefix: uploadsPrefix, Days: uploadsDays}) {
		t.Fatalf("bucket lifecycle %+v, %v: want uploads/ expiring after %d day", rules, err, uploadsDays)
	}
	for _, k := range []string{"videos/t/source.mp4", "outputs/t/final.mp4", "tts/t/dub.wav"} {
		if _, err := b.Client.PutObject(ctx, b.Name, k, strings.NewReader("data"), 4, minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	u, err := minio.New(b.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(p.AccessKey, p.SecretKey, ""),
		Secure: b.UseSSL, Region: blob.DefaultRegion})
	if err != nil {
		t.Fatal(err)
	}
	put := func(k string) error {
		_, err := u.PutObject(ctx, b.Name, k, strings.NewReader("x"), 1, minio.PutObjectOptions{})
		return err
	}
	get := func(k string) error {
		_, err := u.StatObject(ctx, b.Name, k, minio.StatObjectOptions{})
		return err
	}
	if err := put("uploads/t/source.mp4"); err != nil {
		t.Fatalf("write uploads/: %v", err)
	}
	if err := get("outputs/t/final.mp4"); err != nil {
		t.Fatalf("read outputs/: %v", err)
	}
	denied := map[string]error{
		"read videos/":      get("videos/t/source.mp4"),
		"read tts/":         get("tts/t/dub.wav"),
		"read uploads/":     get("uploads/t/source.mp4"),
		"write outputs/":    put("outputs/t/final.mp4"),
		"write videos/":     put("videos/t/source.mp4"),
		"delete an upload":  u.RemoveObject(ctx, b.Name, "uploads/t/source.mp4", minio.RemoveObjectOptions{}),
		"delete an output":  u.RemoveObject(ctx, b.Name, "outputs/t/final.mp4", minio.RemoveObjectOptions{}),
		"list the bucket":   (<-u.ListObjects(ctx, b.Name, minio.ListObjectsOptions{Recursive: true})).Err,
		"create a bucket":   u.MakeBucket(ctx, b.Name+"-x", minio.MakeBucketOptions{}),
		"read bucket rules": func() error { _, err := u.GetBucketPolicy(ctx, b.Name); return err }(),
	}
	for what, err := range denied {
		if minio.ToErrorResponse(err).Code != "AccessDenied" {
			t.Errorf("%s as the presign user: %v, want AccessDenied", what, err)
		}
	}
	if got, _ := b.Client.GetObject(ctx, b.Name, "outputs/t/final.mp4", minio.GetObjectOptions{}); got != nil {
		var buf bytes.Buffer
		buf.ReadFrom(got)
		if buf.String() != "data" {
			t.Fatalf("outputs/t/final.mp4 now %q: the presign user changed it", buf.String())
		}
	}
	presignedURLs(t, b, p)
}

// presignedURLs: what the presign user signs names it, and reaches what it
// may and no more.
func presignedURLs(t *testing.T, b *testenv.Bucket, p config.S3Presign) {
	t.Helper()
	ctx := context.Background()
	s3 := p.Signing(config.S3{Endpoint: b.Endpoint, AccessKey: b.AccessKey, SecretKey: b.SecretKey, Bucket: b.Name, UseSSL: b.UseSSL})
	signer, err := blob.NewPresigner(s3, "", "")
	if err != nil {
		t.Fatal(err)
	}
	up, err := signer.PresignPost(ctx, blob.UploadPolicy{Key: "uploads/u/source.mp4", Expiry: time.Minute, MaxBytes: 100, ContentType: "video/mp4"})
	if err != nil {
		t.Fatal(err)
	}
	if cred := up.Fields["x-amz-credential"]; !strings.HasPrefix(cred, p.AccessKey+"/") {
		t.Fatalf("upload policy's x-amz-credential %q, want the presign user %s", cred, p.AccessKey)
	}
	if status, body := blobtest.Post(t, up.URL.String(), up.Fields, blob.UploadFileField, []byte("video")); status/100 != 2 {
		t.Fatalf("presigned upload as the presign user: %d %s", status, body)
	}
	for key, want := range map[string]int{"outputs/t/final.mp4": http.StatusOK, "videos/t/source.mp4": http.StatusForbidden,
		"uploads/u/source.mp4": http.StatusForbidden} {
		u, err := signer.PresignGet(ctx, key, time.Minute, "")
		if err != nil {
			t.Fatal(err)
		}
		if cred := u.Query().Get("X-Amz-Credential"); !strings.HasPrefix(cred, p.AccessKey+"/") {
			t.Fatalf("link's X-Amz-Credential %q, want the presign user %s", cred, p.AccessKey)
		}
		resp, err := http.Get(u.String())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("presigned GET of %s: %d, want %d", key, resp.StatusCode, want)
		}
	}
}

// TestPresignUserSecretRotates: migrate run with a new secret sets it; the
// old one no longer signs anything the store accepts.
func TestPresignUserSecretRotates(t *testing.T) {
	t.Parallel()
	b, p, environ := presignUser(t)
	old := p.SecretKey
	environ["S3_PRESIGN_SECRET_KEY"] = uuid.NewString()
	migrateS3(t, environ)
	ctx := context.Background()
	for secret, ok := range map[string]bool{old: false, environ["S3_PRESIGN_SECRET_KEY"]: true} {
		u, err := minio.New(b.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(p.AccessKey, secret, ""),
			Secure: b.UseSSL, Region: blob.DefaultRegion})
		if err != nil {
			t.Fatal(err)
		}
		_, err = u.PutObject(ctx, b.Name, "uploads/r/source.mp4", strings.NewReader("x"), 1, minio.PutObjectOptions{})
		if (err == nil) != ok {
			t.Errorf("upload with the %s secret: %v", map[bool]string{true: "new", false: "old"}[ok], err)
		}
	}
}

func TestPresignSettingsAreChecked(t *testing.T) {
	t.Parallel()
	main := config.S3{AccessKey: "minioadmin"}
	for _, bad := range []config.S3Presign{{AccessKey: "p"}, {SecretKey: "secret-key"}, {AccessKey: "p", SecretKey: "short"},
		{AccessKey: "minioadmin", SecretKey: "secret-key"}} {
		if err := bad.Validate(main); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if err := (config.S3Presign{}).Validate(main); err != nil {
		t.Errorf("no presign user: %v", err)
	}
}
