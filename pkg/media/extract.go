package media

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/fault"
)

// ASRSampleRate is the sample rate of extracted audio: what speech
// recognizers expect.
const ASRSampleRate = 16000

// ExtractAudio writes the first audio stream of the media file in to outWav
// as mono 16 kHz 16-bit PCM WAV. The file appears only when complete. An
// input without audio, truncated, or not media is a permanent error.
//
// maxDuration (> 0) bounds the work whatever the container claims: decoding
// stops a little past it (-t, and -fs for the bytes that allows), and audio
// that really runs longer than maxDuration is a permanent error wrapping
// ErrTooLong.
func ExtractAudio(ctx context.Context, in, outWav string, maxDuration time.Duration) error {
	input, err := inputArgs(in, "")
	if err != nil {
		return err
	}
	var maxBytes int64
	if maxDuration > 0 {
		maxBytes = wavSize(maxDuration+decodeSlack, asrFormat) + outputSizeMargin
	}
	return writeAtomically(outWav, func(tmp string) error {
		args := append(input,
			"-map", "0:a:0", "-vn", "-sn", "-dn",
			"-ac", "1", "-ar", strconv.Itoa(ASRSampleRate), "-c:a", "pcm_s16le",
			"-fflags", "+bitexact")
		args = append(args, capArgs(maxDuration, maxBytes)...)
		args = append(args, outputArgs("wav", tmp)...)
		stderr, err := runFFmpeg(ctx, args...)
		if err != nil {
			return classifyFFmpegError(in, stderr, fmt.Errorf("extract audio from %s: %w", in, err))
		}
		if strings.Contains(stderr, "partial file") {
			return fault.Permanent(fmt.Errorf("truncated media file (data missing): %s", in))
		}
		path := strings.TrimPrefix(tmp, "file:")
		if err := checkSize("extract audio from "+in, path, maxBytes); err != nil {
			return err
		}
		d, err := WAVFileDuration(path)
		if err != nil {
			return fmt.Errorf("extract audio from %s: %w", in, err)
		}
		return CheckLength("the audio of "+in, d, maxDuration)
	})
}

// asrFormat is the format ExtractAudio writes.
var asrFormat = WAVFormat{SampleRate: ASRSampleRate, Channels: 1, BitsPerSample: 16}

// writeAtomically runs write on a temporary path beside out and renames it
// to out on success, so a reader never sees a half-written file.
func writeAtomically(out string, write func(tmp string) error) error {
	outURL, err := localOutput(out)
	if err != nil {
		return err
	}
	abs := strings.TrimPrefix(outURL, "file:")
	f, err := os.CreateTemp(filepath.Dir(abs), ".media-*"+filepath.Ext(abs))
	if err != nil {
		return fmt.Errorf("create temporary file for %s: %w", out, err)
	}
	tmp := f.Name()
	f.Close()
	defer os.Remove(tmp)
	if err := write("file:" + tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, abs); err != nil {
		return fmt.Errorf("rename %s: %w", out, err)
	}
	return nil
}

// classifyFFmpegError marks the failures that come from the input itself
// as permanent with a clear message; everything else keeps err as is.
func classifyFFmpegError(in, stderr string, err error) error {
	var exitErr *ExitError
	if !errors.As(err, &exitErr) {
		return err
	}
	switch {
	case strings.Contains(stderr, "Stream map '0:a") && strings.Contains(stderr, "matches no streams"):
		return fault.Permanent(fmt.Errorf("no audio stream in %s", in))
	case notWhitelisted.MatchString(stderr):
		return fault.Permanent(fmt.Errorf("unsupported format %s: %s", notWhitelisted.FindStringSubmatch(stderr)[1], in))
	case strings.Contains(stderr, "Decoder (codec") && strings.Contains(stderr, "not found"):
		return fault.Permanent(fmt.Errorf("unsupported codec in %s: %s", in, stderr))
	case strings.Contains(stderr, "moov atom not found") && hasMP4Header(in):
		return fault.Permanent(fmt.Errorf("truncated media file (moov atom missing): %s", in))
	case strings.Contains(stderr, "Invalid data found"), strings.Contains(stderr, "moov atom not found"):
		return fault.Permanent(fmt.Errorf("not a media file: %s", in))
	}
	return err
}

// Volume is the loudness of an audio stream in dBFS.
type Volume struct {
	MeanDB float64
	MaxDB  float64
}

// SilenceDB is the peak level under which audio counts as silent.
const SilenceDB = -50.0

var volumeLine = regexp.MustCompile(`(mean|max)_volume: (-?[0-9.]+|-inf) dB`)

// MeasureVolume measures the first audio stream of path with ffmpeg's
// volumedetect filter.
func MeasureVolume(ctx context.Context, path string) (Volume, error) {
	input, err := inputArgs(path, "")
	if err != nil {
		return Volume{}, err
	}
	args := append(input, "-map", "0:a:0", "-af", "volumedetect", "-f", "null", "-")
	stderr, err := runFFmpegLog(ctx, "info", args...)
	if err != nil {
		return Volume{}, classifyFFmpegError(path, stderr, fmt.Errorf("measure volume of %s: %w", path, err))
	}
	v, found := Volume{}, 0
	for _, m := range volumeLine.FindAllStringSubmatch(stderr, -1) {
		db := -120.0 // volumedetect's floor for -inf
		if m[2] != "-inf" {
			if db, err = strconv.ParseFloat(m[2], 64); err != nil {
				return Volume{}, fmt.Errorf("measure volume of %s: parse %q: %w", path, m[0], err)
			}
		}
		if m[1] == "mean" {
			v.MeanDB = db
		} else {
			v.MaxDB = db
		}
		found++
	}
	if found < 2 {
		return Volume{}, fmt.Errorf("measure volume of %s: no volumedetect result in %q", path, stderr)
	}
	return v, nil
}

// MeanVolume is the mean level of the first audio stream of path, in dBFS.
func MeanVolume(ctx context.Context, path string) (float64, error) {
	v, err := MeasureVolume(ctx, path)
	return v.MeanDB, err
}

// IsSilent reports whether the first audio stream of path never rises above
// SilenceDB.
func IsSilent(ctx context.Context, path string) (bool, error) {
	v, err := MeasureVolume(ctx, path)
	if err != nil {
		return false, err
	}
	return v.MaxDB < SilenceDB, nil
}
