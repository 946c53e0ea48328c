package testenv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/config"
	"github.com/google/uuid"
	"github.com/minio/minio-go/v7/pkg/signer"
)

// PresignUser creates a presign user of its own for the bucket of s3 (the
// storage user the console signs with: write uploads/, read outputs/),
// with the real services/migrate as `make up` and the Kubernetes Job run
// it, and removes the user and its policy when the test ends.
func PresignUser(tb testing.TB, s3 config.S3) config.S3Presign {
	tb.Helper()
	dir, err := SharedBinaries("migrate")
	if err != nil {
		tb.Fatalf("testenv: build migrate: %v", err)
	}
	p := config.S3Presign{AccessKey: "presign-" + uuid.NewString()[:8], SecretKey: uuid.NewString()}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "migrate"), "-skip-db", "-skip-amqp")
	cmd.Env = []string{"S3_ENDPOINT=" + s3.Endpoint, "S3_ACCESS_KEY=" + s3.AccessKey, "S3_SECRET_KEY=" + s3.SecretKey,
		"S3_BUCKET=" + s3.Bucket, "S3_USE_SSL=" + strconv.FormatBool(s3.UseSSL),
		"S3_PRESIGN_ACCESS_KEY=" + p.AccessKey, "S3_PRESIGN_SECRET_KEY=" + p.SecretKey}
	tb.Cleanup(func() {
		minioAdminDelete(tb, s3, "remove-user", "accessKey", p.AccessKey)
		minioAdminDelete(tb, s3, "remove-canned-policy", "name", "dubflow-presign-"+s3.Bucket)
	})
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("testenv: migrate (presign user): %v\n%s", err, out)
	}
	return p
}

// minioAdminDelete sends one DELETE of MinIO's admin API (what madmin-go
// does for RemoveUser and RemoveCannedPolicy), signed as s3's
// administrator.
func minioAdminDelete(tb testing.TB, s3 config.S3, op, param, value string) {
	tb.Helper()
	scheme := "http"
	if s3.UseSSL {
		scheme = "https"
	}
	u := scheme + "://" + s3.Endpoint + "/minio/admin/v3/" + op + "?" + url.Values{param: {value}}.Encode()
	req, err := http.NewRequest(http.MethodDelete, u, nil)
	if err != nil {
		tb.Errorf("testenv: minio admin %s: %v", op, err)
		return
	}
	sum := sha256.Sum256(nil)
	req.Header.Set("X-Amz-Content-Sha256", hex.EncodeToString(sum[:]))
	req = signer.SignV4(*req, s3.AccessKey, s3.SecretKey, "", "us-east-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Errorf("testenv: minio admin %s: %v", op, err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(resp.Body)
		tb.Errorf("testenv: minio admin %s %s: %d %s", op, value, resp.StatusCode, b)
	}
}
