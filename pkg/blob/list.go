package blob

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/minio/minio-go/v7"
)

// Object is a stored object as a listing shows it.
type Object struct {
	Key      string
	Size     int64
	Modified time.Time
}

// List returns up to limit objects whose keys start with prefix, in key
// order.
func (s *Store) List(ctx context.Context, prefix string, limit int) ([]Object, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the listing's goroutine once limit is reached
	var out []Object
	for o := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			return nil, fmt.Errorf("list %s: %w", prefix, mapErr(o.Err))
		}
		out = append(out, Object{Key: o.Key, Size: o.Size, Modified: o.LastModified})
		if len(out) == limit {
			break
		}
	}
	return out, nil
}

// Open opens key for reading and describes it; a missing object is
// ErrNotFound. The reader seeks without reading what it skips (a read
// after a seek is a ranged GET), so an HTTP handler can serve range
// requests from it (http.ServeContent). The caller closes it.
func (s *Store) Open(ctx context.Context, key string) (io.ReadSeekCloser, Info, error) {
	obj, err := s.client.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, Info{}, fmt.Errorf("open %s: %w", key, mapErr(err))
	}
	st, err := obj.Stat()
	if err != nil {
		obj.Close()
		return nil, Info{}, fmt.Errorf("open %s: %w", key, mapErr(err))
	}
	return obj, Info{Size: st.Size, ContentType: st.ContentType, Modified: st.LastModified}, nil
}
