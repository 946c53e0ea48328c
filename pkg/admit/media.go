package admit

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/media"
)

// ProbeTimeout bounds the ffprobe run of Media.
const ProbeTimeout = time.Minute

// Limits are the media limits (config.Limits: MAX_VIDEO_BYTES,
// MAX_VIDEO_SECONDS).
type Limits struct {
	MaxBytes   int64
	MaxSeconds int
}

// Size refuses a video of size bytes over MaxBytes, or an empty one. A
// door that stops reading at MaxBytes+1 bytes passes what it read: the text
// does not depend on how much more there was.
func (l Limits) Size(size int64) error {
	switch {
	case size == 0:
		return refuse("video", "", "empty file")
	case l.MaxBytes > 0 && size > l.MaxBytes:
		return &Error{Field: "video", Reason: fmt.Sprintf("larger than %d bytes (MAX_VIDEO_BYTES)", l.MaxBytes), Kind: TooLarge}
	}
	return nil
}

// Media checks the video in the local file path: at most MaxBytes, media
// that ffprobe reads, with an audio and a video stream, at most MaxSeconds
// long. The error is an *Error whose text never names path (it reads the
// same for an upload in a temporary file and for dubctl's --input).
func (l Limits) Media(ctx context.Context, path string) (*media.Info, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, &Error{Field: "video", Reason: "cannot read the file", Kind: Invalid, Err: err}
	}
	if !fi.Mode().IsRegular() {
		return nil, refuse("video", "", "not a regular file")
	}
	if err := l.Size(fi.Size()); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	info, err := media.Probe(ctx, path)
	if err != nil {
		reason := strings.ReplaceAll(err.Error(), path, "the file")
		if !fault.IsPermanent(err) {
			// The machine's fault (a timeout, no ffprobe), not the file's.
			return nil, &Error{Field: "video", Reason: "could not be checked: " + reason, Kind: Unavailable, Err: err}
		}
		return nil, &Error{Field: "video", Reason: reason, Kind: Invalid, Err: err}
	}
	return info, l.streams(info)
}

// streams checks a probed video's streams and duration.
func (l Limits) streams(info *media.Info) error {
	switch {
	case len(info.StreamsOf(media.AudioStream)) == 0:
		return refuse("video", "", "no audio stream (nothing to dub)")
	case len(info.StreamsOf(media.VideoStream)) == 0:
		return refuse("video", "", "no video stream")
	case l.MaxSeconds <= 0:
		return nil
	case info.Duration <= 0:
		return refuse("video", "", "duration unknown")
	}
	limit := time.Duration(l.MaxSeconds) * time.Second
	if info.Duration > limit {
		return &Error{Field: "video", Reason: fmt.Sprintf("%s long, at most %s (MAX_VIDEO_SECONDS=%d)",
			media.FormatDuration(info.Duration), media.FormatDuration(limit), l.MaxSeconds), Kind: TooLarge,
			Err: media.ErrTooLong}
	}
	return nil
}

// ProbeRecord is the record of info, Media's probe of path, that a door
// stores with the task (task.SubmitProbed) for extract_audio to reuse
// when it downloads the same bytes and runs the same ffprobe, instead of
// starting ffprobe again; nil when there is none to keep (a video over
// media.ProbeRecordMaxBytes, a file it cannot read): extract_audio probes.
func ProbeRecord(path string, info *media.Info) []byte {
	raw, err := media.RecordProbeJSON(path, info)
	if err != nil {
		return nil
	}
	return raw
}
