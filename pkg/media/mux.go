package media

import (
	"cmp"
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
	// BurnSubtitles, when set, is an SRT file drawn into the picture: the
	// video is re-encoded (H.264) instead of copied.
	BurnSubtitles string
	// MaxDuration (> 0) bounds the output whatever the video's container
	// claims: a video claiming longer is refused, ffmpeg stops writing a
	// little past the limit (-t), and an output that really runs longer is
	// a permanent error wrapping ErrTooLong.
	MaxDuration time.Duration
	// Info is Video's probe (ProbeInput with RequireVideo) when the caller
	// has made it: Mux does not start ffprobe on the video again.
	Info *Info
}

// audioBytesPerSecond bounds the audio Mux writes per second: the dub at
// 192 kbit/s plus the original track, copied or re-encoded, generously.
const audioBytesPerSecond = 64 << 10

// burnBytesPerSecond bounds the video Mux writes per second when it burns
// subtitles in and so re-encodes the picture (CRF 20 rarely passes 8 Mbit/s
// at the sizes people upload; the cap stops a runaway, not a normal file).
const burnBytesPerSecond = 1 << 20

// copyableAudio are audio codecs an MP4 carries as they are; others are
// re-encoded to AAC.
var copyableAudio = []string{"aac", "mp3", "ac3", "eac3", "alac"}

// Mux writes out as an MP4 with in.Video's video stream copied bit for bit
// (or, with BurnSubtitles, re-encoded with those subtitles drawn in), the
// dub track as the default AAC audio track, the original audio as a second
// track, and the subtitles, each tagged with its language and titled (MP4
// keeps titles as handler names); the index is at the front (faststart) so
// players can stream it.
func Mux(ctx context.Context, in MuxInput, out string) error {
	job, err := in.plan(ctx)
	if err != nil {
		return err
	}
	args, err := job.args()
	if err != nil {
		return err
	}
	return writeAtomically(out, func(tmp string) error {
		args := append(args, "-map_chapters", "-1", "-movflags", "+faststart")
		args = append(args, capArgs(in.MaxDuration, job.maxBytes)...)
		args = append(args, outputArgs("mp4", tmp)...)
		stderr, err := runFFmpeg(ctx, args...)
		if err != nil {
			return classifyFFmpegError(in.Video, stderr, fmt.Errorf("mux %s: %w", out, err))
		}
		path := strings.TrimPrefix(tmp, "file:")
		if err := checkSize("mux "+in.Video, path, job.maxBytes); err != nil {
			return err
		}
		if in.MaxDuration <= 0 {
			return nil
		}
		// The output was written by ffmpeg from the packets it copied: its
		// duration is what the streams really hold.
		got, err := outputLength(ctx, path)
		if err != nil {
			return fmt.Errorf("mux %s: check output: %w", out, err)
		}
		return CheckLength("the video of "+in.Video, got, in.MaxDuration)
	})
}

// outputLength is the length of an MP4 that Mux wrote, from its movie
// header (what ffprobe would report, without starting it: ~0.24 CPU-s of
// loading its libraries saved per task); Probe when the header cannot be
// read.
func outputLength(ctx context.Context, path string) (time.Duration, error) {
	if d, err := MP4Duration(path); err == nil {
		return d, nil
	}
	got, err := Probe(ctx, path)
	if err != nil {
		return 0, err
	}
	return got.Duration, nil
}

// muxJob is a checked MuxInput with what Mux learned about its video.
type muxJob struct {
	MuxInput
	dubLang, origLang string
	subLangs          []string
	info              *Info
	length            time.Duration
	maxBytes          int64
}

// plan checks the input and sizes the output.
func (in MuxInput) plan(ctx context.Context) (*muxJob, error) {
	j := &muxJob{MuxInput: in, subLangs: make([]string, len(in.Subtitles))}
	var err error
	if j.dubLang, err = ISO639(in.DubLanguage); err != nil {
		return nil, fmt.Errorf("mux: dub %w", err)
	}
	if j.origLang, err = ISO639(in.OriginalLanguage); err != nil {
		return nil, fmt.Errorf("mux: original %w", err)
	}
	for i, s := range in.Subtitles {
		if j.subLangs[i], err = ISO639(s.Language); err != nil {
			return nil, fmt.Errorf("mux: subtitle %s: %w", s.Path, err)
		}
	}
	if j.info = in.Info; j.info == nil {
		if j.info, err = ProbeInput(ctx, in.Video, Limits{RequireVideo: true}); err != nil {
			return nil, fmt.Errorf("mux: %w", err)
		}
	} else if err := j.info.Check(Limits{RequireVideo: true}); err != nil {
		return nil, fmt.Errorf("mux: %w", err)
	}
	if j.length = j.info.StreamsOf(VideoStream)[0].Duration; j.length <= 0 {
		j.length = j.info.Duration
	}
	if j.length <= 0 {
		return nil, fault.Permanent(fmt.Errorf("mux: duration of %s is unknown", in.Video))
	}
	if err := CheckLength(in.Video+" (as its container claims)", j.length, in.MaxDuration); err != nil {
		return nil, fmt.Errorf("mux: %w", err)
	}
	// The output holds the video's packets (or the re-encoded picture), the
	// audio tracks and the subtitles: its size is bounded (-fs).
	outLen := j.length
	if in.MaxDuration > 0 {
		outLen = in.MaxDuration + decodeSlack
	}
	secs := int64(outLen.Seconds() + 1)
	j.maxBytes = j.info.Size + secs*audioBytesPerSecond + outputSizeMargin
	if in.BurnSubtitles != "" {
		j.maxBytes += j.info.Size + secs*burnBytesPerSecond
	}
	for _, s := range in.Subtitles {
		if fi, err := os.Stat(s.Path); err == nil {
			j.maxBytes += fi.Size()
		}
	}
	return j, nil
}

// args returns ffmpeg's inputs and stream mapping.
func (j *muxJob) args() ([]string, error) {
	args, err := inputArgs(j.Video, "")
	if err != nil {
		return nil, err
	}
	dub, err := inputArgs(j.DubWav, "wav")
	if err != nil {
		return nil, err
	}
	args = append(args, dub...)
	for _, s := range j.Subtitles {
		sub, err := inputArgs(s.Path, "srt")
		if err != nil {
			return nil, err
		}
		args = append(args, sub...)
	}
	video, err := j.videoArgs()
	if err != nil {
		return nil, err
	}
	secs := strconv.FormatFloat(j.length.Seconds(), 'f', 6, 64)
	args = append(append(args, video...),
		"-map", "1:a:0", "-c:a:0", "aac", "-aac_coder:a:0", "fast", "-b:a:0", j.dubBitrate(),
		"-filter:a:0", "apad=whole_dur="+secs+",atrim=duration="+secs,
		"-metadata:s:a:0", "language="+j.dubLang, "-metadata:s:a:0", "handler_name=Dub ("+j.dubLang+")",
		"-disposition:a:0", "default")
	if orig := j.info.StreamsOf(AudioStream); len(orig) > 0 {
		codec := "aac"
		if slices.Contains(copyableAudio, orig[0].Codec) {
			codec = "copy"
		}
		args = append(args,
			"-map", "0:a:0", "-c:a:1", codec,
			"-metadata:s:a:1", "language="+j.origLang, "-metadata:s:a:1", "handler_name=Original ("+j.origLang+")",
			"-disposition:a:1", "0")
	}
	for i, s := range j.Subtitles {
		n := strconv.Itoa(i)
		title := cmp.Or(s.Title, j.subLangs[i])
		args = append(args,
			"-map", strconv.Itoa(i+2)+":s:0", "-c:s:"+n, "mov_text",
			"-metadata:s:s:"+n, "language="+j.subLangs[i], "-metadata:s:s:"+n, "handler_name="+title)
	}
	return args, nil
}

// dubBitrate is the dub track's AAC bitrate: 192 kb/s for a stereo
// track, 128 kb/s for a mono one (the dub has the soundtrack's channels;
// mono without one). At 192 kb/s ffmpeg's AAC encoder takes twice as long
// (10.7 vs 5.2 s for 10 minutes of mono speech) for no audible gain.
//
// The track is encoded with the encoder's "fast" coder rather than its
// default two-loop search: on 10 minutes of mono speech at 128 kb/s it
// took 5.3 s instead of 9.0 s (stereo 192 kb/s: 12.2 vs 15.7 s), and the
// decoded track was closer to the dub, not further (error 46 vs 36 dB
// below the signal), for a file 3 % larger.
func (j *muxJob) dubBitrate() string {
	if orig := j.info.StreamsOf(AudioStream); len(orig) > 0 && orig[0].Channels >= 2 {
		return "192k"
	}
	return "128k"
}

// videoArgs copies the video stream, or re-encodes it with the
// BurnSubtitles file drawn in by libass.
func (j *muxJob) videoArgs() ([]string, error) {
	if j.BurnSubtitles == "" {
		return []string{"-map", "0:v:0", "-c:v", "copy"}, nil
	}
	sub, err := localInput(j.BurnSubtitles)
	if err != nil {
		return nil, fmt.Errorf("mux: burn subtitles: %w", err)
	}
	vf := "subtitles=filename=" + filterQuote(strings.TrimPrefix(sub, "file:")) + ":charenc=UTF-8"
	return []string{"-map", "0:v:0", "-filter:v:0", vf, "-c:v", "libx264", "-preset", "veryfast", "-crf", "20",
		"-pix_fmt", "yuv420p"}, nil
}

// filterQuote quotes a value for an ffmpeg filter graph: escaped for the
// option parser, then for the graph parser.
func filterQuote(v string) string {
	v = strings.NewReplacer(`\`, `\\`, `'`, `\'`, `:`, `\:`).Replace(v)
	return strings.NewReplacer(`\`, `\\`, `'`, `\'`, `[`, `\[`, `]`, `\]`, `,`, `\,`, `;`, `\;`).Replace(v)
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
