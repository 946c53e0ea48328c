// Package blob stores media in S3-compatible object storage (MinIO in the
// local stack) through minio-go. Keys come from messages and are checked by
// the caller (wire.CheckKey) before they reach this package; blob only moves
// bytes and files. Copy, whose two keys may belong to two tasks, checks both
// itself.
package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
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
		return fmt.Errorf("upload %s: %w", key, mapErr(err))
	}
	return nil
}

// Put uploads r (size bytes, -1 if unknown) under key.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error {
	if _, err := s.client.PutObject(ctx, s.bucket, key, r, size, minio.PutObjectOptions{ContentType: contentType}); err != nil {
		return fmt.Errorf("upload %s: %w", key, mapErr(err))
	}
	return nil
}

// ErrTooLarge is wrapped by the error of a download that exceeds the
// caller's size limit.
var ErrTooLarge = errors.New("too large")

// GetFile downloads key into the local file path, writing at most maxBytes
// (when > 0). The limit is enforced while reading, whatever the object's
// metadata claims: a download is refused as soon as the response announces
// more, and cut off as soon as one byte more than maxBytes arrives, with an
// error wrapping ErrTooLarge (which no retry fixes). The file appears at path
// only complete; on any error nothing is left behind, not even a partial
// file. A missing object is ErrNotFound.
func (s *Store) GetFile(ctx context.Context, key, path string, maxBytes int64) (err error) {
	// Core's GetObject is one plain GET: its body is read as it comes,
	// never cut or stretched to a size learnt from an earlier stat (which
	// the high-level Object reader does).
	obj, info, _, err := minio.Core{Client: s.client}.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return fmt.Errorf("download %s: %w", key, mapErr(err))
	}
	defer obj.Close()
	// The response's Content-Length refuses an announced oversize before a
	// byte is written; the count below catches the rest.
	if maxBytes > 0 && info.Size > maxBytes {
		return tooLarge(key, fmt.Sprintf("%d bytes", info.Size), maxBytes)
	}

	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".part-*")
	if err != nil {
		return fmt.Errorf("download %s: %w", key, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	var r io.Reader = obj
	if maxBytes > 0 {
		r = io.LimitReader(obj, maxBytes+1)
	}
	n, err := io.Copy(f, r)
	if err != nil {
		return fmt.Errorf("download %s: %w", key, mapErr(err))
	}
	if maxBytes > 0 && n > maxBytes {
		return tooLarge(key, "more than that", maxBytes)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("download %s: %w", key, err)
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("download %s: %w", key, err)
	}
	return nil
}

// tooLarge is the error of a download over its limit.
func tooLarge(key, size string, limit int64) error {
	return fmt.Errorf("download %s: %w: limit %d bytes, object is %s", key, ErrTooLarge, limit, size)
}

// Get reads a whole (small) object of at most maxBytes; a larger one is an
// error wrapping ErrTooLarge.
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
		return nil, tooLarge(key, "more than that", maxBytes)
	}
	return data, nil
}

// Info describes a stored object.
type Info struct {
	Size        int64
	ContentType string
	// Modified is when the object was last written.
	Modified time.Time
}

// Stat describes key; a missing object is ErrNotFound.
func (s *Store) Stat(ctx context.Context, key string) (Info, error) {
	st, err := s.client.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{})
	if err != nil {
		return Info{}, fmt.Errorf("stat %s: %w", key, mapErr(err))
	}
	return Info{Size: st.Size, ContentType: st.ContentType, Modified: st.LastModified}, nil
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
	if unreachable(err, resp) {
		return fault.Unavailable(err)
	}
	return err
}

// unreachable tells an outage of the object store (no connection, a
// connection cut mid-request, a server answering 5xx or "not ready") from
// an answer about the object.
func unreachable(err error, resp minio.ErrorResponse) bool {
	switch {
	case resp.StatusCode >= 500,
		resp.Code == "ServiceUnavailable", resp.Code == "SlowDown", resp.Code == "XMinioServerNotInitialized":
		return true
	}
	var urlErr *url.Error
	var netErr net.Error
	return errors.As(err, &urlErr) || errors.As(err, &netErr) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET)
}

// Ref names an object of one task: Key must be a key of that task
// (wire.CheckKey).
type Ref struct {
	Task uuid.UUID
	Key  string
}

// Copy copies the object src to dst inside the bucket, server-side (one S3
// CopyObject: no byte passes through this process; objects up to the S3
// limit of 5 GiB). Both keys must be safe keys of kind that belong to their
// tasks (wire.CheckKey); a violation is a permanent error and nothing is
// copied. A missing src is a permanent error wrapping ErrNotFound; an
// outage of the store is fault.Unavailable. Copying again over an earlier
// copy rewrites the same bytes, so a repeated Copy is harmless.
func (s *Store) Copy(ctx context.Context, kind string, src, dst Ref) error {
	if err := wire.CheckKey(src.Key, kind, src.Task); err != nil {
		return fault.Permanent(fmt.Errorf("copy from %q: %w", src.Key, err))
	}
	if err := wire.CheckKey(dst.Key, kind, dst.Task); err != nil {
		return fault.Permanent(fmt.Errorf("copy to %q: %w", dst.Key, err))
	}
	_, err := s.client.CopyObject(ctx, minio.CopyDestOptions{Bucket: s.bucket, Object: dst.Key},
		minio.CopySrcOptions{Bucket: s.bucket, Object: src.Key})
	if err == nil {
		return nil
	}
	err = mapErr(err)
	if errors.Is(err, ErrNotFound) {
		err = fault.Permanent(err)
	}
	return fmt.Errorf("copy %s to %s: %w", src.Key, dst.Key, err)
}
