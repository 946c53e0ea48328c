package media

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/dubflow/dubflow/pkg/fault"
)

// ErrTooLong is wrapped by the permanent error of media that really runs
// longer than the limit it is processed under, whatever its container
// claims.
var ErrTooLong = errors.New("too long")

const (
	// decodeSlack is how far past its limit a decode or mux runs before
	// ffmpeg cuts it (-t): enough to tell an input that is over the limit
	// from one whose streams end a little after the container says.
	decodeSlack = 2 * time.Second
	// lengthTolerance is how much longer than the limit decoded media may be
	// (encoder priming and padding) before it counts as too long.
	lengthTolerance = time.Second
	// outputSizeMargin is added to an output's computed size cap (-fs) for
	// headers, indexes and rounding.
	outputSizeMargin = 16 << 20
)

// CheckLength returns a permanent error wrapping ErrTooLong when what
// (a file, a key) lasts d and that is longer than limit (> 0) by more than
// the tolerance that encoders' padding needs.
func CheckLength(what string, d, limit time.Duration) error {
	if limit > 0 && d > limit+lengthTolerance {
		return fault.Permanent(fmt.Errorf("%w: %s runs at least %s, limit %s", ErrTooLong, what, FormatDuration(d), FormatDuration(limit)))
	}
	return nil
}

// capArgs are the output options that bound one ffmpeg output to limit
// (plus slack) and to maxBytes: -t and -fs.
func capArgs(limit time.Duration, maxBytes int64) []string {
	var args []string
	if limit > 0 {
		args = append(args, "-t", strconv.FormatFloat((limit+decodeSlack).Seconds(), 'f', 3, 64))
	}
	if maxBytes > 0 {
		args = append(args, "-fs", strconv.FormatInt(maxBytes, 10))
	}
	return args
}

// checkSize fails when ffmpeg stopped writing out because it reached the
// -fs cap maxBytes: the output is cut, not complete.
func checkSize(what, out string, maxBytes int64) error {
	if maxBytes <= 0 {
		return nil
	}
	fi, err := os.Stat(out)
	if err != nil {
		return fmt.Errorf("stat %s: %w", out, err)
	}
	if fi.Size() >= maxBytes {
		return fault.Permanent(fmt.Errorf("%s: output reached its size cap of %d bytes", what, maxBytes))
	}
	return nil
}

// WAVFileDuration is the length of the PCM WAV file at path as far as its
// bytes go: the header's data size, or less when the file holds less (a
// header can announce anything).
func WAVFileDuration(path string) (time.Duration, error) {
	return fileDuration(path, func(f *os.File, size int64) (time.Duration, error) {
		cr := &countingReader{r: f}
		w, err := NewWAVReader(cr)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", path, err)
		}
		data := size - cr.n
		if w.remaining >= 0 && w.remaining < data {
			data = w.remaining
		}
		return framesToDuration(data/int64(w.Format.frameBytes()), w.Format.SampleRate), nil
	})
}

// fileDuration opens the file at path and returns what read makes of it
// and its size: the length a container's own header gives, without ffprobe.
// An error opening or stating the file is returned as it is.
func fileDuration(path string, read func(f *os.File, size int64) (time.Duration, error)) (time.Duration, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return read(f, fi.Size())
}

// wavSize is the size of d of WAV audio in format f, header excluded.
func wavSize(d time.Duration, f WAVFormat) int64 {
	return int64(d.Seconds()*float64(f.SampleRate)) * int64(f.frameBytes())
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
