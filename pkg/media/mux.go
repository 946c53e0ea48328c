package media

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/text/language"

	"github.com/dubflow/dubflow/pkg/fault"
)

// Subtitle is a soft subtitle track to add to the output, from an SRT file.
type Subtitle struct {
	Path     string
	Language string // BCP 47 or ISO 639 code: "es", "spa", "en-US"
	Title    string
}

// MuxInput names the parts of a dubbed video.
type MuxInput struct {
	// Video is the original video; its video stream is copied untouched and
	// its first audio stream, if any, is kept as the second audio track.
	Video string
	// DubWav is the dub track (AssembleDub's output): the first, default
	// audio track, padded or cut to the video's length.
	DubWav string
	// DubLanguage and OriginalLanguage tag the two audio tracks.
	DubLanguage      string
	OriginalLanguage string
	// Subtitles become mov_text tracks. (MP4 marks the first subtitle
	// track enabled; players still show subtitles only on request.)
	Subtitles []Subtitle
	// MaxDuration (> 0) bounds the output whatever the video's container
	// claims: a video claiming longer is refused, ffmpeg stops writing a
	// little past the limit (-t), and an output that really runs longer is
	// a permanent error wrapping ErrTooLong.
	MaxDuration time.Duration
}

// audioBytesPerSecond bounds the audio Mux writes per second: the dub at
// 128 kbit/s plus the original track, copied or re-encoded, generously.
const audioBytesPerSecond = 64 << 10

// copyableAudio are audio codecs an MP4 carries as they are; others are
// re-encoded to AAC.
var copyableAudio = []string{"aac", "mp3", "ac3", "eac3", "alac"}

// Mux writes out as an MP4 with in.Video's video stream copied bit for bit,
// the dub track as the default AAC audio track, the original audio as a
// second track, and the subtitles, each tagged with its language and
// titled (MP4 keeps titles as handler names); the index
// is at the front (faststart) so players can stream it.
func Mux(ctx context.Context, in MuxInput, out string) error {
	dubLang, err := ISO639(in.DubLanguage)
	if err != nil {
		return fmt.Errorf("mux: dub %w", err)
	}
	origLang, err := ISO639(in.OriginalLanguage)
	if err != nil {
		return fmt.Errorf("mux: original %w", err)
	}
	info, err := ProbeInput(ctx, in.Video, Limits{RequireVideo: true})
	if err != nil {
		return fmt.Errorf("mux: %w", err)
	}
	length := info.StreamsOf(VideoStream)[0].Duration
	if length <= 0 {
		length = info.Duration
	}
	if length <= 0 {
		return fault.Permanent(fmt.Errorf("mux: duration of %s is unknown", in.Video))
	}
	if err := CheckLength(in.Video+" (as its container claims)", length, in.MaxDuration); err != nil {
		return fmt.Errorf("mux: %w", err)
	}
	// The output holds the video's packets, the audio tracks and the
	// subtitles: its size is bounded by the inputs (-fs).
	outLen := length
	if in.MaxDuration > 0 {
		outLen = in.MaxDuration + decodeSlack
	}
	maxBytes := info.Size + int64(outLen.Seconds()+1)*audioBytesPerSecond + outputSizeMargin
	for _, s := range in.Subtitles {
		if fi, err := os.Stat(s.Path); err == nil {
			maxBytes += fi.Size()
		}
	}

	var args []string
	video, err := inputArgs(in.Video, "")
	if err != nil {
		return err
	}
	dub, err := inputArgs(in.DubWav, "wav")
	if err != nil {
		return err
	}
	args = append(append(args, video...), dub...)
	subLangs := make([]string, len(in.Subtitles))
	for i, s := range in.Subtitles {
		if subLangs[i], err = ISO639(s.Language); err != nil {
			return fmt.Errorf("mux: subtitle %s: %w", s.Path, err)
		}
		sub, err := inputArgs(s.Path, "srt")
		if err != nil {
			return err
		}
		args = append(args, sub...)
	}

	secs := strconv.FormatFloat(length.Seconds(), 'f', 6, 64)
	args = append(args,
		"-map", "0:v:0", "-c:v", "copy",
		"-map", "1:a:0", "-c:a:0", "aac", "-b:a:0", "128k",
		"-filter:a:0", "apad=whole_dur="+secs+",atrim=duration="+secs,
		"-metadata:s:a:0", "language="+dubLang, "-metadata:s:a:0", "handler_name=Dub ("+dubLang+")",
		"-disposition:a:0", "default")
	if orig := info.StreamsOf(AudioStream); len(orig) > 0 {
		codec := "aac"
		if slices.Contains(copyableAudio, orig[0].Codec) {
			codec = "copy"
		}
		args = append(args,
			"-map", "0:a:0", "-c:a:1", codec,
			"-metadata:s:a:1", "language="+origLang, "-metadata:s:a:1", "handler_name=Original ("+origLang+")",
			"-disposition:a:1", "0")
	}
	for i, s := range in.Subtitles {
		n := strconv.Itoa(i)
		title := s.Title
		if title == "" {
			title = subLangs[i]
		}
		args = append(args,
			"-map", strconv.Itoa(i+2)+":s:0", "-c:s:"+n, "mov_text",
			"-metadata:s:s:"+n, "language="+subLangs[i], "-metadata:s:s:"+n, "handler_name="+title)
	}
	return writeAtomically(out, func(tmp string) error {
		args := append(args, "-map_chapters", "-1", "-movflags", "+faststart")
		args = append(args, capArgs(in.MaxDuration, maxBytes)...)
		args = append(args, outputArgs("mp4", tmp)...)
		stderr, err := runFFmpeg(ctx, args...)
		if err != nil {
			return classifyFFmpegError(in.Video, stderr, fmt.Errorf("mux %s: %w", out, err))
		}
		path := strings.TrimPrefix(tmp, "file:")
		if err := checkSize("mux "+in.Video, path, maxBytes); err != nil {
			return err
		}
		if in.MaxDuration <= 0 {
			return nil
		}
		// The output was written by ffmpeg from the packets it copied: its
		// duration is what the streams really hold.
		got, err := Probe(ctx, path)
		if err != nil {
			return fmt.Errorf("mux %s: check output: %w", out, err)
		}
		return CheckLength("the video of "+in.Video, got.Duration, in.MaxDuration)
	})
}

// ISO639 returns the ISO 639-2/T code that MP4 language tags use for a
// BCP 47 or ISO 639 code ("es", "es-MX", "spa" give "spa"); "" gives "und".
func ISO639(code string) (string, error) {
	code = strings.TrimSpace(code)
	if code == "" || strings.EqualFold(code, "und") {
		return "und", nil
	}
	tag, err := language.Parse(code)
	if err != nil {
		return "", fmt.Errorf("language %q: %w", code, err)
	}
	base, conf := tag.Base()
	if conf == language.No {
		return "", fmt.Errorf("language %q: unknown", code)
	}
	iso := base.ISO3()
	if len(iso) != 3 {
		return "", fmt.Errorf("language %q: no ISO 639-2 code", code)
	}
	return iso, nil
}
