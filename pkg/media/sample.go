package media

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SampleKind selects what MakeSampleVideo produces.
type SampleKind int

// Sample kinds: a good video and the bad inputs a dubbing pipeline must
// reject clearly.
const (
	// SampleSpeech is an H.264 + AAC MP4 with the text spoken in English.
	SampleSpeech SampleKind = iota
	// SampleNoAudio has a video stream only.
	SampleNoAudio
	// SampleSilent has an audio stream that is digital silence.
	SampleSilent
	// SampleTruncatedIndex is SampleSpeech cut short with its index
	// (the moov atom) at the end, so the index is missing.
	SampleTruncatedIndex
	// SampleTruncatedData is SampleSpeech with its index at the front and
	// the media data cut short.
	SampleTruncatedData
	// SampleLongerThanClaimed is SampleSpeech (followed by silence) as
	// Matroska whose streams run SampleOptions.Length while its container
	// claims to last SampleOptions.Claimed: a file lying about its duration.
	SampleLongerThanClaimed
)

// SampleOptions tune MakeSampleVideo; zero values pick the defaults.
type SampleOptions struct {
	Kind SampleKind
	// Voice is an espeak-ng voice, default "en-us", or "flite:NAME" for a
	// flite voice (flite's rms is recognized far better by pocketsphinx than
	// espeak-ng's synthetic voices).
	Voice string
	// Width and Height of the picture; default 320x240.
	Width, Height int
	// Lead is silence before the speech and after it; default 500 ms.
	Lead time.Duration
	// Length and Claimed are SampleLongerThanClaimed's real and claimed
	// durations; default 20 s and 2 s.
	Length, Claimed time.Duration
}

// speak synthesizes text with voice (see SampleOptions.Voice) into the WAV
// file out; the text never reaches a command line.
func speak(ctx context.Context, work, text, voice, out string) error {
	if name, ok := strings.CutPrefix(voice, "flite:"); ok {
		// flite falls back to its default voice for an unknown name: check.
		list, _, err := run(ctx, 10*time.Second, nil, "flite", "-lv")
		if err != nil {
			return fmt.Errorf("flite: %w", err)
		}
		if !slices.Contains(strings.Fields(strings.TrimPrefix(string(list), "Voices available:")), name) {
			return fmt.Errorf("flite has no voice %q (%s)", name, strings.TrimSpace(string(list)))
		}
		textFile := filepath.Join(work, "text.txt")
		if err := os.WriteFile(textFile, []byte(text), 0o600); err != nil {
			return err
		}
		if _, stderr, err := run(ctx, time.Minute, nil, "flite", "-voice", name, "-f", textFile, "-o", out); err != nil {
			return fmt.Errorf("flite: %w (%s)", err, stderr)
		}
		return nil
	}
	if _, stderr, err := run(ctx, time.Minute, strings.NewReader(text), "espeak-ng", "-v", voice, "-w", out, "--stdin"); err != nil {
		return fmt.Errorf("espeak-ng: %w (%s)", err, stderr)
	}
	return nil
}

// MakeSampleVideo writes a short MP4 to out: real speech of text from
// espeak-ng over a generated test picture, lasting the speech plus a
// lead-in and lead-out. Variants for bad-input tests follow opts.Kind. It
// is for demos and tests; text is passed to espeak-ng on stdin.
func MakeSampleVideo(ctx context.Context, text, out string, opts SampleOptions) error {
	opts = opts.withDefaults()
	outURL, err := localOutput(out)
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "dubflow-sample-*")
	if err != nil {
		return fmt.Errorf("make sample video: %w", err)
	}
	defer os.RemoveAll(work)

	speech := filepath.Join(work, "speech.wav")
	if err := speak(ctx, work, text, opts.Voice, speech); err != nil {
		return fmt.Errorf("make sample video: %w", err)
	}
	speechDur, err := WAVFileDuration(speech) // from the file's size when the header is pipe-like
	if err != nil {
		return fmt.Errorf("make sample video: speech output: %w", err)
	}
	total, format, name := speechDur+2*opts.Lead, "mp4", "full.mp4"
	if opts.Kind == SampleLongerThanClaimed {
		total, format, name = opts.Length, "matroska", "full.mkv"
	}
	full := filepath.Join(work, name)
	if stderr, err := runFFmpeg(ctx, opts.ffmpegArgs(speech, total, format, full)...); err != nil {
		return fmt.Errorf("make sample video: %w (%s)", err, stderr)
	}
	if err := opts.damage(full); err != nil {
		return fmt.Errorf("make sample video: %w", err)
	}
	if err := copyFile(full, strings.TrimPrefix(outURL, "file:")); err != nil {
		return fmt.Errorf("make sample video: %w", err)
	}
	return nil
}

func (o SampleOptions) withDefaults() SampleOptions {
	o.Voice = cmp.Or(o.Voice, "en-us")
	if o.Width == 0 || o.Height == 0 {
		o.Width, o.Height = 320, 240
	}
	o.Lead = cmp.Or(o.Lead, 500*time.Millisecond)
	if o.Kind == SampleLongerThanClaimed {
		o.Length, o.Claimed = cmp.Or(o.Length, 20*time.Second), cmp.Or(o.Claimed, 2*time.Second)
	}
	return o
}

// ffmpegArgs makes the sample of kind o.Kind, total long, into the file
// full: the test picture, and the speech delayed by o.Lead.
func (o SampleOptions) ffmpegArgs(speech string, total time.Duration, format, full string) []string {
	args := []string{"-f", "lavfi", "-i", fmt.Sprintf("testsrc2=size=%dx%d:rate=25", o.Width, o.Height)}
	switch o.Kind {
	case SampleNoAudio:
		args = append(args, "-map", "0:v")
	case SampleSilent:
		args = append(args, "-f", "lavfi", "-i", "anullsrc=r=22050:cl=mono", "-map", "0:v", "-map", "1:a")
	default:
		args = append(args, "-protocol_whitelist", "file", "-f", "wav", "-i", "file:"+speech, "-filter_complex",
			"[1:a]adelay="+strconv.FormatInt(o.Lead.Milliseconds(), 10)+":all=1,apad[a]", "-map", "0:v", "-map", "[a]")
	}
	args = append(args, "-t", strconv.FormatFloat(total.Seconds(), 'f', 3, 64),
		"-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p", "-g", "50")
	if o.Kind != SampleNoAudio {
		args = append(args, "-c:a", "aac", "-b:a", "96k")
	}
	if o.Kind != SampleTruncatedIndex && format == "mp4" {
		args = append(args, "-movflags", "+faststart")
	}
	return append(args, outputArgs(format, "file:"+full)...)
}

// damage turns a good sample into the bad input o.Kind asks for.
func (o SampleOptions) damage(full string) error {
	switch o.Kind {
	case SampleTruncatedIndex, SampleTruncatedData:
		return truncateFile(full, 0.6)
	case SampleLongerThanClaimed:
		return claimDuration(full, o.Claimed)
	}
	return nil
}

// claimDuration rewrites the Duration element of the Matroska file at path
// (an 8-byte float in milliseconds, which ffmpeg writes into the segment
// information at the start) to claim d; the streams stay as they are.
func claimDuration(path string, d time.Duration) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	i := bytes.Index(data[:min(len(data), 4096)], []byte{0x44, 0x89, 0x88})
	if i < 0 {
		return fmt.Errorf("no Duration element in the head of %s", path)
	}
	binary.BigEndian.PutUint64(data[i+3:i+11], math.Float64bits(float64(d.Milliseconds())))
	return os.WriteFile(path, data, 0o644)
}

// truncateFile cuts path to the given fraction of its size.
func truncateFile(path string, fraction float64) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	return os.Truncate(path, int64(float64(fi.Size())*fraction))
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from) // samples are a few hundred kilobytes
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o644)
}
