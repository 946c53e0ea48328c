package blob

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/dubflow/dubflow/pkg/fault"
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

// Need is what a step needs of an object it downloads.
type Need struct {
	// What names the object in errors ("source video"); empty: its key alone.
	What string
	// NonEmpty refuses an empty object.
	NonEmpty bool
	// MaxBytes bounds the download while it reads (0: no bound); Setting is
	// the configuration variable that set it, named when it refuses.
	MaxBytes int64
	Setting  string
}

// Download fetches key from objs into path for a step that cannot do
// without it: a missing object (found so by the stat or by the download)
// and, when need says so, an empty one are permanent failures; so is an
// object larger than need.MaxBytes, whatever its metadata claims (an error
// wrapping ErrTooLarge that names the setting: " (SETTING=value)").
func Download(ctx context.Context, objs Objects, key, path string, need Need) error {
	name := key
	if need.What != "" {
		name = need.What + " " + key
	}
	info, err := objs.Stat(ctx, key)
	switch {
	case errors.Is(err, ErrNotFound):
		return fault.Permanent(fmt.Errorf("%s not found in storage", name))
	case err != nil:
		return fmt.Errorf("stat %s: %w", key, err)
	case need.NonEmpty && info.Size == 0:
		return fault.Permanent(fmt.Errorf("%s is empty", name))
	}
	err = objs.GetFile(ctx, key, path, need.MaxBytes)
	switch {
	case errors.Is(err, ErrNotFound):
		return fault.Permanent(fmt.Errorf("%s not found in storage", name))
	case errors.Is(err, ErrTooLarge):
		return fault.Permanent(fmt.Errorf("%w (%s=%v)", err, need.Setting, need.MaxBytes))
	}
	return err
}
