package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/dubflow/dubflow/pkg/config"
	"github.com/minio/madmin-go/v3"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Prefixes the presign user reaches: it writes uploads (the console's
// presigned POST policies) and reads outputs (the download links); every
// other key of the bucket — a task's source video, its audio, transcript
// and synthesis — is out of its reach, and so is listing or deleting.
const (
	uploadsPrefix = "uploads/"
	outputsPrefix = "outputs/"
)

// presignPolicyName names the presign user's policy on bucket.
func presignPolicyName(bucket string) string { return "dubflow-presign-" + bucket }

// presignPolicy is the IAM policy of the presign user on bucket.
func presignPolicy(bucket string) []byte {
	type statement struct {
		Effect   string   `json:"Effect"`
		Action   []string `json:"Action"`
		Resource []string `json:"Resource"`
	}
	arn := "arn:aws:s3:::" + bucket + "/"
	doc := struct {
		Version   string      `json:"Version"`
		Statement []statement `json:"Statement"`
	}{"2012-10-17", []statement{
		{"Allow", []string{"s3:PutObject"}, []string{arn + uploadsPrefix + "*"}},
		{"Allow", []string{"s3:GetObject"}, []string{arn + outputsPrefix + "*"}},
	}}
	b, _ := json.Marshal(doc) // a fixed shape: cannot fail
	return b
}

// ensurePresignUser makes the presign user of p exist on the MinIO of
// store (through MinIO's admin API, with store's credentials, which must
// be an administrator's), with p's secret and the policy of
// presignPolicy attached. Every part is idempotent: a second run changes
// nothing, a changed secret is set anew.
func ensurePresignUser(ctx context.Context, store config.S3, p config.S3Presign) error {
	adm, err := adminClient(store)
	if err != nil {
		return fmt.Errorf("presign user: admin client for %s: %w", store.Endpoint, err)
	}
	name := presignPolicyName(store.Bucket)
	if err := adm.AddCannedPolicy(ctx, name, presignPolicy(store.Bucket)); err != nil {
		return fmt.Errorf("presign user: create policy %s (MinIO's admin API, as S3_ACCESS_KEY; on another store create the user yourself and unset S3_PRESIGN_ACCESS_KEY for migrate): %w", name, err)
	}
	if err := adm.AddUser(ctx, p.AccessKey, p.SecretKey); err != nil {
		return fmt.Errorf("presign user: create user %s: %w", p.AccessKey, err)
	}
	info, err := adm.GetUserInfo(ctx, p.AccessKey)
	if err != nil {
		return fmt.Errorf("presign user: read user %s: %w", p.AccessKey, err)
	}
	if slices.Contains(strings.Split(info.PolicyName, ","), name) {
		return nil
	}
	if _, err := adm.AttachPolicy(ctx, madmin.PolicyAssociationReq{Policies: []string{name}, User: p.AccessKey}); err != nil {
		return fmt.Errorf("presign user: attach policy %s to %s: %w", name, p.AccessKey, err)
	}
	return nil
}

// adminClient reaches MinIO's admin API as store's user.
func adminClient(store config.S3) (*madmin.AdminClient, error) {
	return madmin.NewWithOptions(store.Endpoint, &madmin.Options{
		Creds:  credentials.NewStaticV4(store.AccessKey, store.SecretKey, ""),
		Secure: store.UseSSL,
	})
}
