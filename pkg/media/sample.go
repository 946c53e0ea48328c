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
	if opts.Voice == "" {
		opts.Voice = "en-us"
	}
	if opts.Width == 0 || opts.Height == 0 {
		opts.Width, opts.Height = 320, 240
	}
	if opts.Lead == 0 {
		opts.Lead = 500 * time.Millisecond
	}
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
	f, err := os.Open(speech)
	if err != nil {
		return fmt.Errorf("make sample video: %w", err)
	}
	r, err := NewWAVReader(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("make sample video: speech output: %w", err)
	}
	speechDur := r.Duration()
	if speechDur < 0 { // the synthesizer wrote a pipe-like header; size from the file
		fi, err := os.Stat(speech)
		if err != nil {
			return fmt.Errorf("make sample video: %w", err)
		}
		speechDur = framesToDuration((fi.Size()-wavHeaderSize)/int64(r.Format.frameBytes()), r.Format.SampleRate)
	}
	total := speechDur + 2*opts.Lead
	format, name := "mp4", "full.mp4"
	if opts.Kind == SampleLongerThanClaimed {
		total, format, name = cmp.Or(opts.Length, 20*time.Second), "matroska", "full.mkv"
		opts.Claimed = cmp.Or(opts.Claimed, 2*time.Second)
	}
	secs := strconv.FormatFloat(total.Seconds(), 'f', 3, 64)
	leadMS := strconv.FormatInt(opts.Lead.Milliseconds(), 10)

	args := []string{"-f", "lavfi", "-i", fmt.Sprintf("testsrc2=size=%dx%d:rate=25", opts.Width, opts.Height)}
	switch opts.Kind {
	case SampleNoAudio:
		args = append(args, "-map", "0:v")
	case SampleSilent:
		args = append(args, "-f", "lavfi", "-i", "anullsrc=r=22050:cl=mono", "-map", "0:v", "-map", "1:a")
	default:
		args = append(args, "-protocol_whitelist", "file", "-f", "wav", "-i", "file:"+speech,
			"-filter_complex", "[1:a]adelay="+leadMS+":all=1,apad[a]", "-map", "0:v", "-map", "[a]")
	}
	args = append(args, "-t", secs,
		"-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p", "-g", "50")
	if opts.Kind != SampleNoAudio {
		args = append(args, "-c:a", "aac", "-b:a", "96k")
	}
	if opts.Kind != SampleTruncatedIndex && format == "mp4" {
		args = append(args, "-movflags", "+faststart")
	}
	full := filepath.Join(work, name)
	args = append(args, outputArgs(format, "file:"+full)...)
	if stderr, err := runFFmpeg(ctx, args...); err != nil {
		return fmt.Errorf("make sample video: %w (%s)", err, stderr)
	}
	if opts.Kind == SampleTruncatedIndex || opts.Kind == SampleTruncatedData {
		if err := truncateFile(full, 0.6); err != nil {
			return fmt.Errorf("make sample video: %w", err)
		}
	}
	if opts.Kind == SampleLongerThanClaimed {
		if err := claimDuration(full, opts.Claimed); err != nil {
			return fmt.Errorf("make sample video: %w", err)
		}
	}
	if err := copyFile(full, strings.TrimPrefix(outURL, "file:")); err != nil {
		return fmt.Errorf("make sample video: %w", err)
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
