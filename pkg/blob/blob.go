// Package blob stores media in S3-compatible object storage (MinIO in the
// local stack) through minio-go. Keys come from messages and are checked by
// the caller (wire.CheckKey) before they reach this package; blob only moves
// bytes and files.
package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/dubflow/dubflow/pkg/config"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// ErrNotFound is returned for a key that has no object.
var ErrNotFound = errors.New("object not found")

// Store is one bucket.
type Store struct {
	client *minio.Client
	bucket string
}

// New connects to the bucket of cfg (without network I/O).
func New(cfg config.S3) (*Store, error) {
	c, err := minio.New(cfg.Endpoint, &minio.Options{
		Creds:  credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure: cfg.UseSSL,
	})
	if err != nil {
		return nil, fmt.Errorf("s3 client for %s: %w", cfg.Endpoint, err)
	}
	return &Store{client: c, bucket: cfg.Bucket}, nil
}

// Bucket names the store's bucket.
func (s *Store) Bucket() string { return s.bucket }

// EnsureBucket creates the bucket when it does not exist.
func (s *Store) EnsureBucket(ctx context.Context) error {
	ok, err := s.client.BucketExists(ctx, s.bucket)
	if err != nil {
		return fmt.Errorf("check bucket %s: %w", s.bucket, err)
	}
	if ok {
		return nil
	}
	if err := s.client.MakeBucket(ctx, s.bucket, minio.MakeBucketOptions{}); err != nil {
		if resp := minio.ToErrorResponse(err); resp.Code == "BucketAlreadyOwnedByYou" {
			return nil
		}
		return fmt.Errorf("create bucket %s: %w", s.bucket, err)
	}
	return nil
}

// Ping checks that the bucket answers.
func (s *Store) Ping(ctx context.Context) error {
	ok, err := s.client.BucketExists(ctx, s.bucket)
	if err != nil {
		return fmt.Errorf("reach bucket %s: %w", s.bucket, err)
	}
	if !ok {
		return fmt.Errorf("bucket %s does not exist", s.bucket)
	}
	return nil
}

// PutFile uploads a local file under key.
func (s *Store) PutFile(ctx context.Context, key, path, contentType string) error {
	if _, err := s.client.FPutObject(ctx, s.bucket, key, path, minio.PutObjectOptions{ContentType: contentType}); err != nil {
		return fmt.Errorf("upload %s: %w", key, err)
	}
	return nil
}

// Put uploads r (size bytes, -1 if unknown) under key.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error {
	if _, err := s.client.PutObject(ctx, s.bucket, key, r, size, minio.PutObjectOptions{ContentType: contentType}); err != nil {
		return fmt.Errorf("upload %s: %w", key, err)
	}
	return nil
}

// GetFile downloads key into a local file; an object larger than maxBytes
// (when > 0) is refused. A missing object is ErrNotFound.
func (s *Store) GetFile(ctx context.Context, key, path string, maxBytes int64) error {
	info, err := s.Stat(ctx, key)
	if err != nil {
		return err
	}
	if maxBytes > 0 && info.Size > maxBytes {
		return fmt.Errorf("download %s: object is %d bytes, limit %d", key, info.Size, maxBytes)
	}
	if err := s.client.FGetObject(ctx, s.bucket, key, path, minio.GetObjectOptions{}); err != nil {
		return fmt.Errorf("download %s: %w", key, mapErr(err))
	}
	return nil
}

// Get reads a whole (small) object.
func (s *Store) Get(ctx context.Context, key string, maxBytes int64) ([]byte, error) {
	obj, err := s.client.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, fmt.Errorf("download %s: %w", key, mapErr(err))
	}
	defer obj.Close()
	data, err := io.ReadAll(io.LimitReader(obj, maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("download %s: %w", key, mapErr(err))
	}
	if int64(len(data)) > maxBytes {
		return nil, fmt.Errorf("download %s: object larger than %d bytes", key, maxBytes)
	}
	return data, nil
}

// Info describes a stored object.
type Info struct {
	Size        int64
	ContentType string
}

// Stat describes key; a missing object is ErrNotFound.
func (s *Store) Stat(ctx context.Context, key string) (Info, error) {
	st, err := s.client.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{})
	if err != nil {
		return Info{}, fmt.Errorf("stat %s: %w", key, mapErr(err))
	}
	return Info{Size: st.Size, ContentType: st.ContentType}, nil
}

// Remove deletes key; a missing key is not an error.
func (s *Store) Remove(ctx context.Context, key string) error {
	if err := s.client.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{}); err != nil {
		return fmt.Errorf("remove %s: %w", key, mapErr(err))
	}
	return nil
}

func mapErr(err error) error {
	resp := minio.ToErrorResponse(err)
	if resp.StatusCode == http.StatusNotFound || resp.Code == "NoSuchKey" {
		return fmt.Errorf("%w: %s", ErrNotFound, resp.Message)
	}
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	return err
}
