package media

import (
	"bytes"
	"context"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
)

// StreamVideo is how a task's growing stream takes its source's video,
// decided once from the source (PlanStreamVideo) so that every batch of the
// task, made by whichever process, shares one init segment.
//
// Copied: a source a browser plays as it is (H.264 in 8-bit 4:2:0 with a
// key frame at least every StreamPieceSeconds) is copied, never
// re-encoded, and its batches start and end on its key frames. Else the
// video is re-encoded once per batch at the source's size.
type StreamVideo struct {
	Copy bool
	// Keys are the source's key frames in presentation order (copied
	// only).
	Keys []KeyFrame
	// OffsetUS is how far the stream's timestamps run ahead of the source's
	// timeline: a copied source's reorder delay (B-frames decode before
	// they show), so that no decode time is negative; 0 when re-encoded.
	OffsetUS int64
	// PieceUS is the ffmpeg segment length asked for (hls_time): pieces
	// end on the first key frame after it, so that no piece of a copied
	// source is longer than StreamPieceSeconds.
	PieceUS int64
	// Why says why the video is re-encoded ("" when copied).
	Why string
}

// KeyFrame is a key frame of the source: its presentation and decode
// times, in microseconds on the source's timeline.
type KeyFrame struct {
	PtsUS, DtsUS int64
}

// MS is the key frame's time in whole milliseconds (rounded down): a
// batch's FromMS / ToMS when it starts or ends there.
func (k KeyFrame) MS() int { return int(k.PtsUS / 1000) }

// copyCodecs are the source video codecs a stream copies; copyPixels the
// pixel formats.
var (
	copyCodecs = []string{"h264"}
	copyPixels = []string{"yuv420p", "yuvj420p"}
)

// PlanStreamVideo reads the source's first video stream and its key frames
// (ffprobe, packets only: nothing is decoded) and decides whether its
// stream copies the video. durationMS is the source's length (the last key
// frame's group runs to it).
func PlanStreamVideo(ctx context.Context, path string, durationMS int) (StreamVideo, error) {
	keys := &keyFrameReader{}
	args := []string{"-select_streams", "v:0", "-show_entries", "stream=codec_name,pix_fmt,time_base",
		"-show_entries", "packet=pts,dts,flags", "-of", "csv=p=1:nk=0"}
	if err := runFFprobeTo(ctx, path, keys, args...); err != nil {
		return StreamVideo{}, fmt.Errorf("read the key frames of %s: %w", path, err)
	}
	if err := keys.finish(); err != nil {
		return StreamVideo{}, fmt.Errorf("read the key frames of %s: %w", path, err)
	}
	return keys.plan(int64(durationMS) * 1000), nil
}

// plan decides from what was read.
func (r *keyFrameReader) plan(durationUS int64) StreamVideo {
	v := StreamVideo{}
	switch {
	case !slices.Contains(copyCodecs, r.codec):
		v.Why = "video codec " + r.codec
	case !slices.Contains(copyPixels, r.pixels):
		v.Why = "pixel format " + r.pixels
	case len(r.keys) == 0 || !r.firstIsKey:
		v.Why = "the video does not start on a key frame"
	case r.keys[0].PtsUS < 0 || r.keys[0].PtsUS > maxStartUS:
		v.Why = fmt.Sprintf("the video starts at %.3f s", float64(r.keys[0].PtsUS)/1e6)
	}
	if v.Why != "" {
		return v
	}
	keys := slices.Clone(r.keys)
	slices.SortFunc(keys, func(a, b KeyFrame) int { return int(a.PtsUS - b.PtsUS) })
	var gap int64
	for i, k := range keys {
		end := durationUS
		if i+1 < len(keys) {
			end = keys[i+1].PtsUS
		}
		gap = max(gap, end-k.PtsUS)
		v.OffsetUS = max(v.OffsetUS, k.PtsUS-k.DtsUS)
	}
	piece := int64(StreamPieceSeconds) * 1_000_000
	if gap > piece {
		return StreamVideo{Why: fmt.Sprintf("key frames up to %.1f s apart", float64(gap)/1e6)}
	}
	v.Copy, v.Keys = true, keys
	// A piece ends on the first key frame at least PieceUS in: no later
	// than PieceUS plus the longest group.
	v.PieceUS = max(piece-gap, 500_000)
	return v
}

// Cut is where a batch from fromMS that may reach toMS ends: toMS when the
// video is re-encoded; else the last key frame after fromMS at or before
// toMS (fromMS when there is none: nothing to make yet).
func (v StreamVideo) Cut(fromMS, toMS int) int {
	if !v.Copy {
		return toMS
	}
	cut := fromMS
	for _, k := range v.Keys {
		if ms := k.MS(); ms > fromMS && ms <= toMS {
			cut = ms
		}
	}
	return cut
}

// key is the key frame a copied batch starts or ends at ms on (the first
// one for 0).
func (v StreamVideo) key(ms int) (KeyFrame, bool) {
	if ms == 0 && len(v.Keys) > 0 && v.Keys[0].MS() <= 0 {
		return v.Keys[0], true
	}
	i, ok := slices.BinarySearchFunc(v.Keys, ms, func(k KeyFrame, ms int) int { return k.MS() - ms })
	if !ok {
		return KeyFrame{}, false
	}
	return v.Keys[i], true
}

// keyFrameReader takes ffprobe's csv lines as they come and keeps the
// stream's codec and pixel format and the key frames only: a two-hour
// source has hundreds of thousands of packets.
type keyFrameReader struct {
	partial    []byte
	codec      string
	pixels     string
	base       *big.Rat
	raw        [][2]int64 // key frames' pts, dts in the stream's time base
	keys       []KeyFrame
	packets    int
	firstIsKey bool
}

// maxStartUS is the latest a copied source's first key frame may show
// (the batches' times are the timeline's, which starts at 0).
const maxStartUS = 1000

// maxKeyFrames bounds what a hostile source can make the reader keep.
const maxKeyFrames = 1 << 20

func (r *keyFrameReader) Write(p []byte) (int, error) {
	r.partial = append(r.partial, p...)
	for {
		i := bytes.IndexByte(r.partial, '\n')
		if i < 0 {
			break
		}
		r.line(string(bytes.TrimSpace(r.partial[:i])))
		r.partial = r.partial[i+1:]
	}
	if len(r.partial) > 4096 {
		return 0, fmt.Errorf("ffprobe: a line of over 4096 bytes")
	}
	return len(p), nil
}

// line takes one "packet,pts=…,dts=…,flags=K_" or
// "stream,codec_name=…,pix_fmt=…,time_base=1/…" line.
func (r *keyFrameReader) line(s string) {
	kind, rest, _ := strings.Cut(s, ",")
	fields := map[string]string{}
	for _, f := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(f, "=")
		fields[k] = v
	}
	switch kind {
	case "stream":
		r.codec, r.pixels = fields["codec_name"], fields["pix_fmt"]
		if b, ok := new(big.Rat).SetString(fields["time_base"]); ok && b.Sign() > 0 {
			r.base = b
		}
	case "packet":
		key := strings.HasPrefix(fields["flags"], "K")
		if r.packets++; r.packets == 1 {
			r.firstIsKey = key
		}
		pts, err1 := strconv.ParseInt(fields["pts"], 10, 64)
		dts, err2 := strconv.ParseInt(fields["dts"], 10, 64)
		if key && err1 == nil && len(r.raw) < maxKeyFrames {
			if err2 != nil {
				dts = pts
			}
			r.raw = append(r.raw, [2]int64{pts, dts})
		}
	}
}

// finish converts the key frames to microseconds once the time base is
// known (ffprobe prints the stream after its packets).
func (r *keyFrameReader) finish() error {
	if r.codec == "" {
		return fmt.Errorf("no video stream")
	}
	if r.base == nil {
		return fmt.Errorf("the video stream has no time base")
	}
	us := new(big.Rat).Mul(r.base, big.NewRat(1_000_000, 1))
	conv := func(t int64) int64 {
		x := new(big.Rat).Mul(big.NewRat(t, 1), us)
		// Rounded up: a seek to the key frame's time lands on it, never
		// on the one before.
		q, m := new(big.Int).DivMod(x.Num(), x.Denom(), new(big.Int))
		if m.Sign() > 0 {
			q.Add(q, big.NewInt(1))
		}
		return q.Int64()
	}
	for _, k := range r.raw {
		r.keys = append(r.keys, KeyFrame{PtsUS: conv(k[0]), DtsUS: conv(k[1])})
	}
	return nil
}
