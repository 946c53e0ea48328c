package blob

import (
	"context"
	"fmt"
	"slices"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/lifecycle"
)

// ExpirePrefix makes the bucket's lifecycle rule id remove the objects
// under prefix days days after they were written (the store's own
// scanner does it, at day granularity), replacing an earlier rule of that
// id and keeping the bucket's other rules.
func (s *Store) ExpirePrefix(ctx context.Context, id, prefix string, days int) error {
	cfg, err := s.client.GetBucketLifecycle(ctx, s.bucket)
	if err != nil {
		if minio.ToErrorResponse(err).Code != "NoSuchLifecycleConfiguration" {
			return fmt.Errorf("read the lifecycle of %s: %w", s.bucket, mapErr(err))
		}
		cfg = lifecycle.NewConfiguration()
	}
	cfg.Rules = slices.DeleteFunc(cfg.Rules, func(r lifecycle.Rule) bool { return r.ID == id })
	cfg.Rules = append(cfg.Rules, lifecycle.Rule{
		ID:         id,
		Status:     "Enabled",
		RuleFilter: lifecycle.Filter{Prefix: prefix},
		Expiration: lifecycle.Expiration{Days: lifecycle.ExpirationDays(days)},
	})
	if err := s.client.SetBucketLifecycle(ctx, s.bucket, cfg); err != nil {
		return fmt.Errorf("set the lifecycle of %s: %w", s.bucket, mapErr(err))
	}
	return nil
}

// Expiry is a lifecycle rule as ExpirePrefix sets it.
type Expiry struct {
	ID, Prefix string
	Days       int
}

// Expiries lists the bucket's expiry rules.
func (s *Store) Expiries(ctx context.Context) ([]Expiry, error) {
	cfg, err := s.client.GetBucketLifecycle(ctx, s.bucket)
	if minio.ToErrorResponse(err).Code == "NoSuchLifecycleConfiguration" {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the lifecycle of %s: %w", s.bucket, mapErr(err))
	}
	var out []Expiry
	for _, r := range cfg.Rules {
		if r.Status == "Enabled" && r.Expiration.Days > 0 {
			out = append(out, Expiry{ID: r.ID, Prefix: r.RuleFilter.Prefix, Days: int(r.Expiration.Days)})
		}
	}
	return out, nil
}
