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

// Presigner signs requests on one bucket for clients without credentials
// (browsers): download links and upload policies. A signature covers the
// host, so the URL must name the object store as the client reaches it,
// which may not be the address the services use (S3_ENDPOINT). What a
// signed request may do is also bounded by the user that signs it: the
// console signs as a user that can only write uploads/ and read outputs/
// (config.S3Presign), so that no URL it hands out reaches anything else.
type Presigner struct {
	client    *minio.Client
	bucket    string
	accessKey string
}

// DefaultRegion is the region a presigner names when none is given: the
// one MinIO answers to by default.
const DefaultRegion = "us-east-1"

// NewPresigner signs with cfg's credentials for cfg's bucket at publicURL
// (http[s]://host[:port], the object store as clients reach it; empty:
// cfg's own endpoint). Signing needs the bucket's region; giving it
// (DefaultRegion when empty) spares a lookup, so the presigner makes no
// network call, publicURL need not be reachable from the service, and the
// signing user needs no right to ask the bucket's location.
func NewPresigner(cfg config.S3, publicURL, region string) (*Presigner, error) {
	host, secure := cfg.Endpoint, cfg.UseSSL
	if publicURL != "" {
		u, err := url.Parse(publicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return nil, fmt.Errorf("public object store URL %q: want http[s]://host[:port]", publicURL)
		}
		host, secure = u.Host, u.Scheme == "https"
	}
	if region == "" {
		region = DefaultRegion
	}
	c, err := minio.New(host, &minio.Options{
		Creds:  credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure: secure,
		Region: region,
	})
	if err != nil {
		return nil, fmt.Errorf("s3 client for %s: %w", host, err)
	}
	return &Presigner{client: c, bucket: cfg.Bucket, accessKey: cfg.AccessKey}, nil
}

// AccessKey names the user the presigner signs as.
func (p *Presigner) AccessKey() string { return p.accessKey }

// PresignGet returns a URL that downloads key without credentials for at
// least expiry (at most LinkWindow more: links are aligned to it, the same
// URL for the same object in the same window); download, when not empty,
// names the file a browser saves.
func (p *Presigner) PresignGet(ctx context.Context, key string, expiry time.Duration, download string) (*url.URL, error) {
	return p.presignGetAt(ctx, key, expiry, download, time.Now())
}

// UploadPolicy is what a presigned upload allows: one object, its key
// fixed, of 1 to MaxBytes bytes, of ContentType, until Expiry from now.
type UploadPolicy struct {
	Key         string
	Expiry      time.Duration
	MaxBytes    int64
	ContentType string
}

// UploadFileField is the form field of a presigned upload that carries
// the file; S3 reads every field after it as part of the file, so it comes
// last.
const UploadFileField = "file"

// Upload is a presigned upload (an S3 POST policy): a client sends Fields,
// then the file as UploadFileField, to URL as one multipart/form-data
// POST, without credentials. The store itself refuses a file out of the
// policy's bounds, another key or another content type, and anything after
// the policy expired.
type Upload struct {
	URL    *url.URL
	Fields map[string]string
}

// PresignPost signs pol as a POST policy.
func (p *Presigner) PresignPost(ctx context.Context, pol UploadPolicy) (Upload, error) {
	if pol.MaxBytes < 1 || pol.Expiry <= 0 || pol.ContentType == "" {
		return Upload{}, fmt.Errorf("presign post %s: want a size limit, a lifetime and a content type", pol.Key)
	}
	pp := minio.NewPostPolicy()
	for _, err := range []error{pp.SetBucket(p.bucket), pp.SetKey(pol.Key),
		pp.SetExpires(time.Now().UTC().Add(pol.Expiry)), pp.SetContentLengthRange(1, pol.MaxBytes),
		pp.SetContentType(pol.ContentType)} {
		if err != nil {
			return Upload{}, fmt.Errorf("presign post %s: %w", pol.Key, err)
		}
	}
	u, fields, err := p.client.PresignedPostPolicy(ctx, pp)
	if err != nil {
		return Upload{}, fmt.Errorf("presign post %s: %w", pol.Key, err)
	}
	return Upload{URL: u, Fields: fields}, nil
}

// Origin is the scheme and host the presigner's URLs point at (for a
// page's Content-Security-Policy).
func (p *Presigner) Origin() string {
	return p.client.EndpointURL().Scheme + "://" + p.client.EndpointURL().Host
}
