package blob

import (
	"context"
	"io"
)

// Objects is the part of the object store a pipeline step uses: it reads
// and writes whole objects, as files or bytes, each read bounded by maxBytes.
// *Store implements it; a step's handler holds this interface so that a test
// can put a fault in front of the store.
type Objects interface {
	Stat(ctx context.Context, key string) (Info, error)
	GetFile(ctx context.Context, key, path string, maxBytes int64) error
	PutFile(ctx context.Context, key, path, contentType string) error
	Get(ctx context.Context, key string, maxBytes int64) ([]byte, error)
	Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error
}

var _ Objects = (*Store)(nil)
