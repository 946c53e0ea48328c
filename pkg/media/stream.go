package media

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// StreamPieceSeconds is the target length of one segment of a growing
// stream (HLS's recommended six seconds): a batch is cut into pieces of
// this length, its last piece shorter.
const StreamPieceSeconds = 6

// StreamInput is one batch of a growing stream: the stretch [FromMS, ToMS)
// of Video, taken as Plan says, with Dub from DubFromMS on (a WAV at least
// DubFromMS+ToMS-FromMS long: AssembleDub's output for the batch's
// stretch, begun where its first line starts) as its sound.
type StreamInput struct {
	Video     string
	Plan      StreamVideo
	Dub       string
	DubFromMS int
	FromMS    int
	ToMS      int
	// Channels is the dub's: 2 or more stream it in stereo, else mono.
	Channels int
	// Last says the batch ends the video: a copied one is read to its end.
	Last     bool
	Dir      string // where the pieces are written; it must exist
	MaxBytes int64  // bounds each written file (0: no bound)
}

// StreamPiece is one written segment of a batch: its file and its length.
type StreamPiece struct {
	File       string
	DurationMS int
}

// StreamBatch is what StreamSegments wrote: the initialisation segment
// (the same bytes for every batch of one source, so that a player keeps
// one) and the batch's pieces in order.
type StreamBatch struct {
	Init   string
	Pieces []StreamPiece
}

// StreamSegments writes one batch of a growing HLS stream as fragmented
// MP4: the video of [FromMS, ToMS), copied from the key frame at FromMS
// to the one at ToMS when the plan copies it, else encoded once at the
// source's size (H.264, a key frame at the start of every piece, no
// B-frames, so that the batch starts exactly where the one before ended),
// and the dub as AAC (mono, or stereo for a stereo dub), cut into pieces of
// about StreamPieceSeconds.
// Timestamps are the source's timeline (plus the plan's OffsetUS), so the
// batches of one task play as one stream without discontinuities.
func StreamSegments(ctx context.Context, in StreamInput) (*StreamBatch, error) {
	if in.ToMS <= in.FromMS || in.FromMS < 0 || in.DubFromMS < 0 {
		return nil, fmt.Errorf("stream batch %d..%d ms: empty", in.FromMS, in.ToMS)
	}
	video, offset, err := streamVideoArgs(in)
	if err != nil {
		return nil, err
	}
	dub, err := inputArgs(in.Dub, "wav")
	if err != nil {
		return nil, err
	}
	length := msSeconds(in.ToMS - in.FromMS)
	channels, audioRate := 1, "96k"
	if in.Channels >= 2 {
		channels, audioRate = 2, "128k"
	}
	args := append(video, append([]string{"-ss", msSeconds(in.DubFromMS), "-t", length}, dub...)...)
	args = append(args, "-map", "0:v:0", "-map", "1:a:0", "-output_ts_offset", offset)
	args = append(args, streamCodecArgs(in.Plan)...)
	args = append(args,
		// The fast coder at a modest rate: a stream's sound costs a third
		// of what final.mp4's does, on cores asr needs meanwhile.
		"-c:a", "aac", "-aac_coder", "fast", "-b:a", audioRate, "-ac", strconv.Itoa(channels),
		"-map_metadata", "-1", "-map_chapters", "-1", "-avoid_negative_ts", "disabled",
		"-hls_segment_type", "fmp4", "-hls_playlist_type", "vod",
		// No edit lists and no shift to zero: each piece's decode time is
		// its place on the task's timeline, and every batch's init is alike.
		"-hls_segment_options", "movflags=+frag_discont:use_editlist=0:avoid_negative_ts=disabled",
		"-hls_fmp4_init_filename", "init.mp4",
		"-hls_segment_filename", filepath.Join(in.Dir, "piece-%03d.m4s"))
	if in.MaxBytes > 0 {
		args = append(args, "-fs", strconv.FormatInt(in.MaxBytes, 10))
	}
	index := filepath.Join(in.Dir, "batch.m3u8")
	args = append(args, "-threads", threads, "-f", "hls", "-y", index)
	if stderr, err := runFFmpeg(ctx, args...); err != nil {
		return nil, classifyFFmpegError(in.Video, stderr, fmt.Errorf("stream %d..%d ms: %w", in.FromMS, in.ToMS, err))
	}
	pieces, err := readPieces(index)
	if err != nil {
		return nil, err
	}
	return &StreamBatch{Init: filepath.Join(in.Dir, "init.mp4"), Pieces: pieces}, nil
}

// streamVideoArgs opens the batch's stretch of the video. A copied one is
// sought to its first key frame and read up to the decode time of the key
// frame that starts the next batch (a copy ends on decode times; half a
// millisecond less, so that the key frame itself never comes along);
// timestamps are shifted onto the timeline: the key frame shows at its
// own time plus the plan's offset.
func streamVideoArgs(in StreamInput) (args []string, offset string, err error) {
	from, length := msSeconds(in.FromMS), msSeconds(in.ToMS-in.FromMS)
	var seek []string
	offset = from
	if in.Plan.Copy {
		first, ok := in.Plan.key(in.FromMS)
		if !ok {
			return nil, "", fmt.Errorf("stream batch %d..%d ms: no key frame of the video at %d ms", in.FromMS, in.ToMS, in.FromMS)
		}
		seek = []string{"-ss", usSeconds(first.PtsUS)}
		if !in.Last {
			next, ok := in.Plan.key(in.ToMS)
			if !ok {
				return nil, "", fmt.Errorf("stream batch %d..%d ms: no key frame of the video at %d ms", in.FromMS, in.ToMS, in.ToMS)
			}
			seek = append(seek, "-t", usSeconds(next.DtsUS-first.PtsUS-500))
		}
		offset = usSeconds(first.PtsUS + in.Plan.OffsetUS)
	} else {
		// -ss before the video's -i seeks by decoding: the batch starts on
		// the frame at FromMS, not on the key frame before it.
		seek = []string{"-ss", from, "-t", length}
	}
	video, err := inputArgs(in.Video, "")
	if err != nil {
		return nil, "", err
	}
	return append(seek, video...), offset, nil
}

// streamCodecArgs are the video's codec and piece options of the plan.
func streamCodecArgs(plan StreamVideo) []string {
	if plan.Copy {
		return []string{"-c:v", "copy", "-hls_time", usSeconds(plan.PieceUS)}
	}
	return []string{"-c:v", "libx264", "-preset", "ultrafast", "-bf", "0", "-pix_fmt", "yuv420p",
		"-force_key_frames", "expr:gte(t,n_forced*" + strconv.Itoa(StreamPieceSeconds) + ")",
		"-hls_time", strconv.Itoa(StreamPieceSeconds)}
}

// usSeconds writes us as seconds for ffmpeg's time options.
func usSeconds(us int64) string {
	sign := ""
	if us < 0 {
		sign, us = "-", -us
	}
	return fmt.Sprintf("%s%d.%06d", sign, us/1_000_000, us%1_000_000)
}

// msSeconds writes ms as seconds for ffmpeg's time options.
func msSeconds(ms int) string {
	return strconv.FormatFloat(float64(ms)/1000, 'f', 3, 64)
}

// readPieces reads the pieces ffmpeg listed in its playlist, with their
// lengths.
func readPieces(index string) ([]StreamPiece, error) {
	f, err := os.Open(index)
	if err != nil {
		return nil, fmt.Errorf("stream: read ffmpeg's playlist: %w", err)
	}
	defer f.Close()
	var out []StreamPiece
	dur := -1
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if v, ok := strings.CutPrefix(line, "#EXTINF:"); ok {
			s, _, _ := strings.Cut(v, ",")
			sec, err := strconv.ParseFloat(s, 64)
			if err != nil || sec < 0 {
				return nil, fmt.Errorf("stream: ffmpeg's playlist: bad %q", line)
			}
			dur = int(sec*1000 + 0.5)
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") || dur < 0 {
			continue
		}
		if strings.ContainsAny(line, "/\\") {
			return nil, fmt.Errorf("stream: ffmpeg's playlist names %q", line)
		}
		out = append(out, StreamPiece{File: filepath.Join(filepath.Dir(index), line), DurationMS: dur})
		dur = -1
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("stream: read ffmpeg's playlist: %w", err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("stream: ffmpeg wrote no piece")
	}
	return slices.Clip(out), nil
}

// CutSoundtrack writes the stretch [fromMS, toMS) of the first audio
// stream of video to out: a 16-bit WAV at 48 kHz in up to two channels,
// exactly that long (padded with silence where the stream is shorter), for
// AssembleDub to mix a batch's voice over.
func CutSoundtrack(ctx context.Context, video string, fromMS, toMS, channels int, out string) error {
	in, err := inputArgs(video, "")
	if err != nil {
		return err
	}
	frames := msToFrames(int64(toMS-fromMS), mixRate)
	args := append([]string{"-ss", msSeconds(fromMS)}, in...)
	args = append(args, "-map", "0:a:0", "-vn", "-af", soundtrackFilter(min(max(channels, 1), 2), frames), "-c:a", "pcm_s16le")
	return writeAtomically(out, func(tmp string) error {
		if stderr, err := runFFmpeg(ctx, append(args, outputArgs("wav", tmp)...)...); err != nil {
			return classifyFFmpegError(video, stderr, fmt.Errorf("cut the soundtrack of %s: %w", video, err))
		}
		return nil
	})
}

// StreamCodecs names the codecs of a stream's init segment as an HLS
// playlist's CODECS attribute does (RFC 6381): the H.264 profile and level
// from its avcC box, and AAC-LC, which StreamSegments encodes. "" when the
// init holds no avcC box.
func StreamCodecs(init []byte) string {
	i := bytes.Index(init, []byte("avcC"))
	if i < 0 || i+8 > len(init) {
		return ""
	}
	// configurationVersion, AVCProfileIndication, profile_compatibility,
	// AVCLevelIndication
	return fmt.Sprintf("avc1.%02x%02x%02x,mp4a.40.2", init[i+5], init[i+6], init[i+7])
}
