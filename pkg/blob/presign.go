package blob

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/dubflow/dubflow/pkg/config"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// PresignGet returns a URL that downloads key without credentials until
// expiry; download, when not empty, names the file a browser saves.
func (s *Store) PresignGet(ctx context.Context, key string, expiry time.Duration, download string) (*url.URL, error) {
	return s.Presigner().PresignGet(ctx, key, expiry, download)
}

// PresignPut returns a URL that uploads an object under key with one HTTP
// PUT, without credentials, until expiry.
func (s *Store) PresignPut(ctx context.Context, key string, expiry time.Duration) (*url.URL, error) {
	return s.Presigner().PresignPut(ctx, key, expiry)
}

// Presigner signs URLs of one bucket for clients without credentials
// (browsers). A signature covers the host, so the URL must name the object
// store as the client reaches it, which may not be the address the
// services use (S3_ENDPOINT).
type Presigner struct {
	client *minio.Client
	bucket string
}

// Presigner signs for the store's own endpoint.
func (s *Store) Presigner() *Presigner { return &Presigner{client: s.client, bucket: s.bucket} }

// DefaultRegion is the region a presigner names when none is given: the
// one MinIO answers to by default.
const DefaultRegion = "us-east-1"

// NewPresigner signs for cfg's bucket and credentials at publicURL
// (http[s]://host[:port], the object store as clients reach it). Signing
// needs the bucket's region; giving it (DefaultRegion when empty) spares a
// lookup, so the presigner makes no network call and publicURL need not be
// reachable from the service.
func NewPresigner(cfg config.S3, publicURL, region string) (*Presigner, error) {
	u, err := url.Parse(publicURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return nil, fmt.Errorf("public object store URL %q: want http[s]://host[:port]", publicURL)
	}
	if region == "" {
		region = DefaultRegion
	}
	c, err := minio.New(u.Host, &minio.Options{
		Creds:  credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure: u.Scheme == "https",
		Region: region,
	})
	if err != nil {
		return nil, fmt.Errorf("s3 client for %s: %w", publicURL, err)
	}
	return &Presigner{client: c, bucket: cfg.Bucket}, nil
}

// PresignGet returns a URL that downloads key without credentials for at
// least expiry (at most LinkWindow more: links are aligned to it, the same
// URL for the same object in the same window); download, when not empty,
// names the file a browser saves.
func (p *Presigner) PresignGet(ctx context.Context, key string, expiry time.Duration, download string) (*url.URL, error) {
	return p.presignGetAt(ctx, key, expiry, download, time.Now())
}

// PresignPut returns a URL that uploads an object under key with one HTTP
// PUT, without credentials, until expiry.
func (p *Presigner) PresignPut(ctx context.Context, key string, expiry time.Duration) (*url.URL, error) {
	u, err := p.client.PresignedPutObject(ctx, p.bucket, key, expiry)
	if err != nil {
		return nil, fmt.Errorf("presign put %s: %w", key, err)
	}
	return u, nil
}

// Origin is the scheme and host the presigner's URLs point at (for a
// page's Content-Security-Policy).
func (p *Presigner) Origin() string {
	return p.client.EndpointURL().Scheme + "://" + p.client.EndpointURL().Host
}
