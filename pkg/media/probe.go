package media

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/fault"
)

// StreamType is the kind of an elementary stream.
type StreamType string

// Stream types reported by ffprobe that dubflow cares about.
const (
	VideoStream    StreamType = "video"
	AudioStream    StreamType = "audio"
	SubtitleStream StreamType = "subtitle"
)

// Info describes a media file.
type Info struct {
	// Path is the file that was probed.
	Path string `json:"path"`
	// FormatName is ffprobe's container name, e.g. "mov,mp4,m4a,3gp,3g2,mj2".
	FormatName string `json:"format_name"`
	// Duration of the container; zero when unknown.
	Duration time.Duration `json:"duration"`
	// Size in bytes.
	Size int64 `json:"size"`
	// Streams in file order.
	Streams []Stream `json:"streams"`
}

// Stream describes one elementary stream of a media file.
type Stream struct {
	Index    int        `json:"index"`
	Type     StreamType `json:"type"`
	Codec    string     `json:"codec"`
	Language string     `json:"language,omitempty"` // "" when absent or "und"
	Title    string     `json:"title,omitempty"`    // title tag, or MP4 handler name unless generic

	SampleRate int           `json:"sample_rate,omitempty"`
	Channels   int           `json:"channels,omitempty"`
	Width      int           `json:"width,omitempty"`
	Height     int           `json:"height,omitempty"`
	Duration   time.Duration `json:"duration,omitempty"`
	Default    bool          `json:"default"`
}

// StreamsOf returns the streams of type t in file order.
func (i *Info) StreamsOf(t StreamType) []Stream {
	var out []Stream
	for _, s := range i.Streams {
		if s.Type == t {
			out = append(out, s)
		}
	}
	return out
}

// Limits are the requirements an input must meet; zero values impose nothing.
type Limits struct {
	// MaxDuration rejects longer inputs.
	MaxDuration time.Duration
	// RequireAudio rejects inputs without an audio stream.
	RequireAudio bool
	// RequireVideo rejects inputs without a video stream.
	RequireVideo bool
}

// Check reports, as a permanent error, the first limit that i breaks.
func (i *Info) Check(lim Limits) error {
	if lim.RequireAudio && len(i.StreamsOf(AudioStream)) == 0 {
		return fault.Permanent(fmt.Errorf("no audio stream in %s", i.Path))
	}
	if lim.RequireVideo && len(i.StreamsOf(VideoStream)) == 0 {
		return fault.Permanent(fmt.Errorf("no video stream in %s", i.Path))
	}
	if lim.MaxDuration > 0 {
		if i.Duration <= 0 {
			return fault.Permanent(fmt.Errorf("duration of %s is unknown, limit %s", i.Path, FormatDuration(lim.MaxDuration)))
		}
		if i.Duration > lim.MaxDuration {
			return fault.Permanent(fmt.Errorf("%w: video is %s, limit %s", ErrTooLong, FormatDuration(i.Duration), FormatDuration(lim.MaxDuration)))
		}
	}
	return nil
}

// FormatDuration writes d rounded to the second without zero units:
// "2h10m", "1h", "45s", "1m30s".
func FormatDuration(d time.Duration) string {
	d = d.Round(time.Second)
	if d == 0 {
		return "0s"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// ProbeInput probes path and checks it against lim.
func ProbeInput(ctx context.Context, path string, lim Limits) (*Info, error) {
	info, err := Probe(ctx, path)
	if err != nil {
		return nil, err
	}
	if err := info.Check(lim); err != nil {
		return nil, err
	}
	return info, nil
}

// Probe describes the media file at path with ffprobe. A file that is not
// media, is in a format outside the whitelist or is truncated so that its
// index is missing yields a permanent error naming the problem.
func Probe(ctx context.Context, path string) (*Info, error) {
	out, stderr, err := runFFprobe(ctx, path, "-show_format", "-show_streams", "-of", "json")
	if err != nil {
		return nil, classifyProbeError(path, stderr, err)
	}
	var raw probeJSON
	if err := json.Unmarshal(out, &raw); err != nil {
		return nil, fmt.Errorf("decode ffprobe output for %s: %w", path, err)
	}
	info := &Info{
		Path:       path,
		FormatName: raw.Format.FormatName,
		Duration:   seconds(raw.Format.Duration),
	}
	info.Size, _ = strconv.ParseInt(raw.Format.Size, 10, 64)
	for _, s := range raw.Streams {
		st := Stream{
			Index:    s.Index,
			Type:     StreamType(s.CodecType),
			Codec:    s.CodecName,
			Language: s.Tags.Language,
			Title:    s.Tags.Title,
			Channels: s.Channels,
			Width:    s.Width,
			Height:   s.Height,
			Duration: seconds(s.Duration),
			Default:  s.Disposition.Default == 1,
		}
		st.SampleRate, _ = strconv.Atoi(s.SampleRate)
		if st.Title == "" && !strings.HasSuffix(s.Tags.Handler, "Handler") {
			st.Title = s.Tags.Handler // MP4 keeps a track's title as its handler name
		}
		if st.Language == "und" {
			st.Language = ""
		}
		info.Streams = append(info.Streams, st)
	}
	if len(info.Streams) == 0 {
		return nil, fault.Permanent(fmt.Errorf("not a media file: %s has no streams", path))
	}
	return info, nil
}

type probeJSON struct {
	Format struct {
		FormatName string `json:"format_name"`
		Duration   string `json:"duration"`
		Size       string `json:"size"`
	} `json:"format"`
	Streams []struct {
		Index      int    `json:"index"`
		CodecType  string `json:"codec_type"`
		CodecName  string `json:"codec_name"`
		SampleRate string `json:"sample_rate"`
		Channels   int    `json:"channels"`
		Width      int    `json:"width"`
		Height     int    `json:"height"`
		Duration   string `json:"duration"`
		Tags       struct {
			Language string `json:"language"`
			Title    string `json:"title"`
			Handler  string `json:"handler_name"`
		} `json:"tags"`
		Disposition struct {
			Default int `json:"default"`
		} `json:"disposition"`
	} `json:"streams"`
}

func seconds(s string) time.Duration {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || f < 0 {
		return 0
	}
	return time.Duration(f * float64(time.Second))
}

var notWhitelisted = regexp.MustCompile(`\[([a-z0-9_,]+) @ [^\]]*\] Format not on whitelist`)

// classifyProbeError turns an ffprobe failure into a clear error: the
// input's faults are permanent, the machine's (timeout, missing tool) are not.
func classifyProbeError(path, stderr string, err error) error {
	var exitErr *ExitError
	if !errors.As(err, &exitErr) {
		return err // unsafe path (already permanent), missing file or tool, timeout
	}
	if !exitErr.Exited() {
		// Killed by a signal (the OOM killer, a container stopping): says
		// nothing about the file, so it is worth another try.
		return fmt.Errorf("ffprobe of %s did not finish: %w", path, err)
	}
	switch {
	case notWhitelisted.MatchString(stderr):
		format := notWhitelisted.FindStringSubmatch(stderr)[1]
		return fault.Permanent(fmt.Errorf("unsupported format %s: %s", format, path))
	case strings.Contains(stderr, "moov atom not found") && hasMP4Header(path):
		return fault.Permanent(fmt.Errorf("truncated media file (moov atom missing): %s", path))
	case strings.Contains(stderr, "Invalid data found"), strings.Contains(stderr, "moov atom not found"):
		return fault.Permanent(fmt.Errorf("not a media file: %s", path))
	}
	// Any other refusal: ffprobe took the bytes for some format (random
	// bytes can pass for an MP3 frame) and could not read them as it.
	return fault.Permanent(fmt.Errorf("not a media file: %s could not be read (%s)", path, probeComplaint(stderr)))
}

// logContext is the "[demuxer @ 0xADDRESS] " prefix of ffmpeg's log lines:
// its address is the process's, noise to whoever reads the error.
var logContext = regexp.MustCompile(`\[[A-Za-z0-9_,]+ @ 0x[0-9a-f]+\] ?`)

// probeComplaint is the first line of ffprobe's stderr without its log
// context, at most 200 bytes: what it could not read, for the error's text.
func probeComplaint(stderr string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(stderr), "\n")
	line = strings.TrimSpace(logContext.ReplaceAllString(line, ""))
	if len(line) > 200 {
		line = line[:200]
	}
	if line == "" {
		return "ffprobe gave no reason"
	}
	return line
}

// hasMP4Header reports whether the file starts with an ISO BMFF box that an
// MP4 writer puts first, i.e. whether it began life as an MP4.
func hasMP4Header(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 8)
	if _, err := io.ReadFull(f, head); err != nil {
		return false
	}
	box := head[4:8]
	for _, b := range [][]byte{[]byte("ftyp"), []byte("mdat"), []byte("free"), []byte("wide")} {
		if bytes.Equal(box, b) {
			return true
		}
	}
	return false
}
