package media

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"time"
)

// errNoMovieHeader is returned by MP4Duration for a file whose movie
// header it cannot find or read.
var errNoMovieHeader = errors.New("no readable MP4 movie header (moov/mvhd)")

// mp4MaxBoxes bounds how many boxes MP4Duration steps over at one level:
// an MP4 that Mux writes has a handful at the top (ftyp, moov, free, mdat)
// and about ten in moov before its mvhd, which comes first.
const mp4MaxBoxes = 64

// MP4Duration reads the length of an MP4 (ISO BMFF) file from its movie
// header (moov/mvhd): the duration ffprobe reports as the container's
// (libavformat's mov demuxer takes it from there, to the microsecond),
// without starting ffprobe. It is meant for files that ffmpeg wrote; a
// fragmented MP4, whose header does not hold the length, is an error, as
// is anything it cannot parse, so a caller can fall back to Probe.
func MP4Duration(path string) (time.Duration, error) {
	return fileDuration(path, func(f *os.File, fileSize int64) (time.Duration, error) {
		return movieDuration(f, fileSize, path)
	})
}

// movieDuration reads the length in the movie header of the MP4 of
// fileSize bytes in f (named path in errors).
func movieDuration(f io.ReaderAt, fileSize int64, path string) (time.Duration, error) {
	moov, size, err := findBox(f, 0, fileSize, "moov")
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	if _, _, err := findBox(f, moov, moov+size, "mvex"); err == nil {
		return 0, fmt.Errorf("%s: fragmented MP4: %w", path, errNoMovieHeader)
	}
	mvhd, size, err := findBox(f, moov, moov+size, "mvhd")
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	d, err := readMVHD(io.NewSectionReader(f, mvhd, size))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

// findBox looks for the box named name among the boxes from start to end
// of r and returns the offset and size of its body (after the header).
func findBox(r io.ReaderAt, start, end int64, name string) (int64, int64, error) {
	head := make([]byte, 16)
	for off, n := start, 0; off+8 <= end && n < mp4MaxBoxes; n++ {
		if _, err := r.ReadAt(head[:8], off); err != nil {
			return 0, 0, errNoMovieHeader
		}
		size, hdr := int64(binary.BigEndian.Uint32(head[:4])), int64(8)
		switch size {
		case 0: // to the end of the enclosing box
			size = end - off
		case 1: // 64-bit size after the type
			if _, err := r.ReadAt(head[8:16], off+8); err != nil {
				return 0, 0, errNoMovieHeader
			}
			size, hdr = int64(binary.BigEndian.Uint64(head[8:16])), 16
		}
		if size < hdr || off+size > end {
			return 0, 0, errNoMovieHeader
		}
		if string(head[4:8]) == name {
			return off + hdr, size - hdr, nil
		}
		off += size
	}
	return 0, 0, errNoMovieHeader
}

// readMVHD reads a movie header's duration, rounded to the microsecond as
// libavformat does (av_rescale to AV_TIME_BASE).
func readMVHD(r io.Reader) (time.Duration, error) {
	var vf [4]byte
	if _, err := io.ReadFull(r, vf[:]); err != nil {
		return 0, errNoMovieHeader
	}
	var timescale uint32
	var duration uint64
	switch vf[0] {
	case 0: // creation and modification times, then timescale and duration: 32 bits
		var b [16]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return 0, errNoMovieHeader
		}
		timescale, duration = binary.BigEndian.Uint32(b[8:12]), uint64(binary.BigEndian.Uint32(b[12:16]))
	case 1: // the times and duration in 64 bits
		var b [28]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return 0, errNoMovieHeader
		}
		timescale, duration = binary.BigEndian.Uint32(b[16:20]), binary.BigEndian.Uint64(b[20:28])
	default:
		return 0, errNoMovieHeader
	}
	if timescale == 0 || duration == 0 || duration == 1<<64-1 || (vf[0] == 0 && duration == 1<<32-1) {
		return 0, errNoMovieHeader // unknown length
	}
	// duration × 10⁶ ÷ timescale, rounded half away from zero, in big
	// integers: a hostile 64-bit duration must not overflow.
	us := new(big.Int).Mul(new(big.Int).SetUint64(duration), big.NewInt(1e6))
	us.Add(us, big.NewInt(int64(timescale/2)))
	us.Quo(us, big.NewInt(int64(timescale)))
	if !us.IsInt64() || us.Int64() > int64(time.Duration(1<<63-1)/time.Microsecond) {
		return 0, errNoMovieHeader
	}
	return time.Duration(us.Int64()) * time.Microsecond, nil
}
