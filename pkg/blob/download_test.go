package blob_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/fault"
)

// oneObject is a store holding at most one object, of size bytes; getErr
// is what its download returns.
type oneObject struct {
	found  bool
	size   int64
	getErr error
}

func (o oneObject) Stat(context.Context, string) (blob.Info, error) {
	if !o.found {
		return blob.Info{}, fmt.Errorf("stat: %w", blob.ErrNotFound)
	}
	return blob.Info{Size: o.size}, nil
}
func (o oneObject) GetFile(context.Context, string, string, int64) error        { return o.getErr }
func (o oneObject) PutFile(context.Context, string, string, string) error       { return nil }
func (o oneObject) Get(context.Context, string, int64) ([]byte, error)          { return nil, nil }
func (o oneObject) Put(context.Context, string, io.Reader, int64, string) error { return nil }

// TestDownloadRefusesWhatAStepCannotUsePermanently: a missing object (at
// the stat or at the download), an empty one where that is refused, and one
// over the limit are permanent failures naming the object or the setting;
// a transient download error stays transient.
func TestDownloadRefusesWhatAStepCannotUsePermanently(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "f")
	video := blob.Need{What: "source video", NonEmpty: true, MaxBytes: 10, Setting: "MAX_VIDEO_BYTES"}
	for _, c := range []struct {
		name      string
		objs      oneObject
		need      blob.Need
		permanent bool
		want      string
	}{
		{"missing", oneObject{}, video, true, "source video videos/x not found in storage"},
		{"gone before the download", oneObject{found: true, size: 5, getErr: blob.ErrNotFound}, video, true, "source video videos/x not found in storage"},
		{"empty", oneObject{found: true}, video, true, "source video videos/x is empty"},
		{"empty allowed", oneObject{found: true}, blob.Need{}, false, ""},
		{"too large", oneObject{found: true, size: 5, getErr: fmt.Errorf("get: %w", blob.ErrTooLarge)}, video, true, "(MAX_VIDEO_BYTES=10)"},
		{"transient", oneObject{found: true, size: 5, getErr: errors.New("connection reset")}, video, false, "connection reset"},
		{"unnamed", oneObject{}, blob.Need{}, true, "videos/x not found in storage"},
	} {
		err := blob.Download(context.Background(), c.objs, "videos/x", path, c.need)
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: %v, want nil", c.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) || fault.IsPermanent(err) != c.permanent {
			t.Errorf("%s: %v (permanent %v), want %q permanent %v", c.name, err, fault.IsPermanent(err), c.want, c.permanent)
		}
	}
}
