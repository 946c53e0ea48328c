package media

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/dubflow/dubflow/pkg/fault"
)

// piece is one run of the joined clips: in samples read, out samples
// played. A piece with tempo 1 is played as it is (in == out); any other
// is one clip, stretched, then cut or padded to out.
type piece struct {
	in, out, cut int64 // cut: where the stretched clip stops (≤ out)
	tempo        float64
}

// voiceTrack is the clips joined back to back, with silence already in
// place wherever nothing is stretched.
type voiceTrack struct {
	path   string
	rate   int
	pieces []piece
}

func (v *voiceTrack) stretched() int {
	n := 0
	for _, p := range v.pieces {
		if p.tempo != 1 {
			n++
		}
	}
	return n
}

// graph returns the filter chains that make [voice] from input 0: split at
// the stretched clips, each stretched and fitted, joined again, resampled.
func (v *voiceTrack) graph(channels int) string {
	tail := "aresample=" + strconv.Itoa(mixRate) + ",aformat=sample_fmts=fltp," + toChannels(channels) + "[voice];"
	if len(v.pieces) == 1 && v.pieces[0].tempo == 1 {
		return "[0:a]" + tail
	}
	var b, labels strings.Builder
	b.WriteString("[0:a]asegment=samples=")
	var at int64
	for i, p := range v.pieces[:len(v.pieces)-1] {
		at += p.in
		if i > 0 {
			b.WriteByte('|')
		}
		b.WriteString(strconv.FormatInt(at, 10))
	}
	for i := range v.pieces {
		fmt.Fprintf(&b, "[p%d]", i)
	}
	b.WriteString(";")
	for i, p := range v.pieces {
		// Each piece starts at 0 for atrim and concat.
		fmt.Fprintf(&b, "[p%d]asetpts=PTS-STARTPTS", i)
		if p.tempo != 1 {
			fmt.Fprintf(&b, ",rubberband=tempo=%s,atrim=end_sample=%d,apad=whole_len=%d",
				strconv.FormatFloat(p.tempo, 'f', -1, 64), p.cut, p.out)
		}
		fmt.Fprintf(&b, "[q%d];", i)
		fmt.Fprintf(&labels, "[q%d]", i)
	}
	fmt.Fprintf(&b, "%sconcat=n=%d:v=0:a=1,%s", labels.String(), len(v.pieces), tail)
	return b.String()
}

// voiceRate is the rate of the joined clips: the first clip's.
func voiceRate(in DubInput) (int, error) {
	for _, p := range in.Placements {
		if p.OutMS > 0 {
			rate, _, _ := clipFormat(in.Clip(p.Idx))
			if rate == 0 {
				return 0, fault.Permanent(fmt.Errorf("segment %d: clip %s is not a PCM WAV", p.N, in.Clip(p.Idx)))
			}
			return rate, nil
		}
	}
	return 24000, nil
}

// writeVoice joins the clips of placements (in timeline order, all
// starting in [fromMS, toMS)) into one mono 16-bit WAV at rate that covers
// exactly that stretch of the timeline: the silence between clips and the
// clips played as they are go in place; a clip to stretch goes in whole,
// as its own piece.
func writeVoice(ctx context.Context, placements []Placement, clip func(int) string, rate, fromMS, toMS int, path string) (*voiceTrack, error) {
	v := &voiceTrack{path: path, rate: rate}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	w, err := NewWAVWriter(f, v.rate, 1)
	if err != nil {
		return nil, err
	}
	base := msToFrames(int64(fromMS), rate)
	j := joiner{w: w, v: v, base: base, total: msToFrames(int64(toMS), rate) - base, buf: make([]int16, 16<<10),
		conv: strings.TrimSuffix(path, ".wav") + "-converted.wav"}
	prevEnd := 0
	for i, p := range placements {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if p.StartMS < prevEnd {
			return nil, fmt.Errorf("segment %d starts at %d ms, before the previous one ends (%d ms)", p.N, p.StartMS, prevEnd)
		}
		prevEnd = p.EndMS()
		next := int64(toMS)
		if i+1 < len(placements) {
			next = int64(placements[i+1].StartMS)
		}
		if err := j.place(ctx, p, clip(p.Idx), msToFrames(next, rate)-base); err != nil {
			return nil, fmt.Errorf("segment %d: %w", p.N, err)
		}
	}
	if err := j.silenceTo(j.total); err != nil {
		return nil, err
	}
	j.flush()
	if err := w.Close(); err != nil {
		return nil, err
	}
	return v, f.Close()
}

// joiner writes the joined clips and collects their pieces.
type joiner struct {
	w     *WAVWriter
	v     *voiceTrack
	base  int64 // where the track starts in the timeline, in frames
	total int64 // track length in frames
	plain int64 // frames of the current tempo-1 piece
	at    int64 // track frames covered so far
	buf   []int16
	conv  string // where a clip in another format is converted
}

func (j *joiner) silenceTo(frame int64) error {
	gap := min(frame, j.total) - j.at
	if gap <= 0 {
		return nil
	}
	j.plain += gap
	j.at += gap
	return j.w.WriteSilence(gap)
}

func (j *joiner) flush() {
	if j.plain > 0 {
		j.v.pieces = append(j.v.pieces, piece{in: j.plain, out: j.plain, cut: j.plain, tempo: 1})
		j.plain = 0
	}
}

// place writes one placement, whose slot runs up to next (in track frames).
func (j *joiner) place(ctx context.Context, p Placement, clip string, next int64) error {
	start := msToFrames(int64(p.StartMS), j.v.rate) - j.base
	if start < j.at {
		return fmt.Errorf("starts at %d ms, before the previous one ends", p.StartMS)
	}
	if err := j.silenceTo(start); err != nil || start >= j.total || p.OutMS <= 0 {
		return err
	}
	out := min(next, j.total) - start
	if out <= 0 {
		return nil
	}
	play := min(msToFrames(int64(p.OutMS), j.v.rate), out)
	skip := msToFrames(int64(p.TrimStartMS), j.v.rate)
	if p.Tempo == 1 {
		n, err := j.copyClip(ctx, clip, skip, play)
		if err != nil {
			return err
		}
		j.plain, j.at = j.plain+n, j.at+n
		return j.silenceTo(start + out)
	}
	j.flush()
	voiced := int64(-1) // all of it
	if p.TrimEndMS > 0 {
		voiced = msToFrames(int64(p.AudioMS-p.TrimStartMS-p.TrimEndMS), j.v.rate)
	}
	n, err := j.copyClip(ctx, clip, skip, voiced)
	if err != nil {
		return err
	}
	if n == 0 { // nothing to stretch: silence
		return j.silenceTo(start + out)
	}
	j.v.pieces = append(j.v.pieces, piece{in: n, out: out, cut: play, tempo: p.Tempo})
	j.at += out
	return nil
}

// copyClip appends up to limit frames (all when limit < 0) of clip after
// its first skip frames, converted first when its format differs from the
// track's.
func (j *joiner) copyClip(ctx context.Context, clip string, skip, limit int64) (int64, error) {
	rate, channels, bits := clipFormat(clip)
	if rate != j.v.rate || channels != 1 || bits != 16 {
		if err := renderClip(ctx, clip, 1, j.v.rate, j.conv); err != nil {
			return 0, err
		}
		clip = j.conv
	}
	f, err := os.Open(clip)
	if err != nil {
		return 0, fmt.Errorf("open clip: %w", err)
	}
	defer f.Close()
	r, err := NewWAVReader(f)
	if err != nil {
		return 0, fmt.Errorf("read clip %s: %w", clip, err)
	}
	for skip > 0 {
		k, err := r.ReadSamples(j.buf[:min(int64(len(j.buf)), skip)])
		if err != nil {
			return 0, nil // all silence
		}
		skip -= int64(k)
	}
	var n int64
	for limit < 0 || n < limit {
		want := int64(len(j.buf))
		if limit >= 0 {
			want = min(want, limit-n)
		}
		k, err := r.ReadSamples(j.buf[:want])
		if k > 0 {
			if werr := j.w.WriteSamples(j.buf[:k]); werr != nil {
				return n, werr
			}
			n += int64(k)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return n, fmt.Errorf("read clip %s: %w", clip, err)
		}
	}
	return n, nil
}

// clipFormat returns a WAV clip's rate, channels and bits per sample;
// zeros when it is not a readable PCM WAV.
func clipFormat(clip string) (rate, channels, bits int) {
	f, err := os.Open(clip)
	if err != nil {
		return 0, 0, 0
	}
	defer f.Close()
	r, err := NewWAVReader(f)
	if err != nil {
		return 0, 0, 0
	}
	return r.Format.SampleRate, r.Format.Channels, r.Format.BitsPerSample
}

// renderClip converts clip to mono 16-bit WAV at rate played at tempo,
// overwriting out.
func renderClip(ctx context.Context, clip string, tempo float64, rate int, out string) error {
	input, err := inputArgs(clip, "")
	if err != nil {
		return err
	}
	filter := "aresample=" + strconv.Itoa(rate)
	if tempo != 1 {
		if tempo < 0.5 || tempo > 100 {
			return fmt.Errorf("tempo %v outside atempo's range", tempo)
		}
		filter = "atempo=" + strconv.FormatFloat(tempo, 'f', -1, 64) + "," + filter
	}
	args := append(input, "-map", "0:a:0", "-af", filter,
		"-ac", "1", "-ar", strconv.Itoa(rate), "-c:a", "pcm_s16le",
		"-fflags", "+bitexact")
	args = append(args, outputArgs("wav", "file:"+out)...)
	stderr, err := runFFmpeg(ctx, args...)
	if err != nil {
		return classifyFFmpegError(clip, stderr, fmt.Errorf("render clip %s: %w", clip, err))
	}
	return nil
}

// voiceStream is the voice of the whole timeline at mixRate, made in
// parts at once (one ffmpeg each) and read in order.
type voiceStream struct {
	parts             []*voicePart
	next              int // the part read next
	file              *sampleReader
	closer            io.Closer
	left              int64 // frames left in the part being read
	zero              bool  // the part being read is silence
	stretched, pieces int
	done              sync.WaitGroup
}

// voicePart is a stretch of the timeline, cut in the silence between
// lines, and the lines in it.
type voicePart struct {
	fromMS, toMS int
	placements   []Placement
	raw          string        // its voice: raw 16-bit mono at mixRate; "" when silent
	started      chan struct{} // closed once it is being made
	ready        chan struct{} // closed once it is made (or failed)
	err          error
	v            *voiceTrack
	// soundtrack, when set, is decoded by the part's ffmpeg as well
	// (sharedSoundtrack).
	soundtrack *sharedSoundtrack
}

// sharedSoundtrack is the soundtrack of a short timeline whose voice is
// made in one part: the part's ffmpeg also decodes it, as startSoundtrack
// would, into a file. Every ffmpeg started costs ~0.1–0.25 CPU-s of
// loading its libraries, as much as decoding a minute of soundtrack: for
// an 11 s clip that was a sixth of mux_video's CPU.
type sharedSoundtrack struct {
	original string
	channels int
	raw      string // 16-bit frames at mixRate in channels, exactly the timeline
}

// sharedSoundtrackMaxMS bounds the timelines whose soundtrack goes
// through a file (2 minutes of 48 kHz stereo: 23 MB on disk); a longer
// one is streamed by its own ffmpeg while the voice is made.
var sharedSoundtrackMaxMS = 120_000 // a variable for the tests

func (p *voicePart) frames() int64 {
	return msToFrames(int64(p.toMS), mixRate) - msToFrames(int64(p.fromMS), mixRate)
}

// minPartStretchMS is how much stretched audio makes another part worth
// its ffmpeg: rubberband takes about 5 ms of CPU per second of audio, an
// ffmpeg about 50 ms to start.
const minPartStretchMS = 20_000

// maxPartStretched bounds the lines one part's ffmpeg stretches: each
// stretched line is a rubberband filter of its own in the graph, with its
// own buffers (about 0.75 MB), so a part of an hour's 400 stretched lines
// would make the ffmpeg grow with the video (a 10-minute video stretches
// about 70 lines, 35 a part on two cores). Bounded, the ffmpeg stays
// flat (~40 MB PSS) and a long timeline is made in more parts, cores at a
// time: at 48 lines two stretching ffmpegs, the soundtrack's decoder and
// mux_video itself peaked at 154 MB over an hour, above the 150 MB a
// worker with its children should stay under.
const maxPartStretched = 36

// splitVoice cuts the timeline into about parts stretches with about as
// much stretching to do in each, and into more when a part would stretch
// more than maxPartStretched lines.
func splitVoice(placements []Placement, totalMS, parts int) []*voicePart {
	weight := func(p Placement) int {
		if p.Tempo != 1 {
			return p.AudioMS
		}
		return 0
	}
	sum, stretched := 0, 0
	for _, p := range placements {
		sum += weight(p)
		if p.Tempo != 1 {
			stretched++
		}
	}
	parts = max(min(parts, sum/minPartStretchMS), (stretched+maxPartStretched-1)/maxPartStretched, 1)
	out := []*voicePart{{}}
	acc, inPart := 0, 0
	for i, p := range placements {
		cur := out[len(out)-1]
		cur.placements = append(cur.placements, p)
		acc += weight(p)
		if p.Tempo != 1 {
			inPart++
		}
		if i+1 == len(placements) {
			continue
		}
		balanced := len(out) < parts && acc*parts >= sum*len(out)
		if !balanced && inPart < maxPartStretched {
			continue
		}
		cut := min((p.EndMS()+placements[i+1].StartMS)/2, totalMS)
		if cut > cur.fromMS && cut >= p.EndMS() {
			cur.toMS = cut
			out = append(out, &voicePart{fromMS: cut})
			inPart = 0
		}
	}
	out[len(out)-1].toMS = max(totalMS, out[len(out)-1].fromMS)
	return out
}

// startVoice starts making the voice of the timeline in as many parts as
// cores (more parts would overlap the mix with the stretching, but each
// costs an ffmpeg; a long timeline takes more, see maxPartStretched),
// cores at a time, in timeline order.
func startVoice(ctx context.Context, in DubInput, parts []*voicePart, rate, cores int, work string) *voiceStream {
	s := &voiceStream{parts: parts}
	slots := make(chan struct{}, cores)
	for i, p := range s.parts {
		p.started, p.ready = make(chan struct{}), make(chan struct{})
		s.done.Add(1)
		go func() {
			defer s.done.Done()
			defer close(p.ready)
			for j := range i { // take a slot in timeline order
				<-s.parts[j].started
			}
			slots <- struct{}{}
			close(p.started)
			defer func() { <-slots }()
			p.err = p.make(ctx, in.Clip, rate, filepath.Join(work, fmt.Sprintf("voice-%d", i)))
		}()
	}
	return s
}

// make joins the part's clips into name.wav and has ffmpeg stretch and
// resample them into name.raw.
func (p *voicePart) make(ctx context.Context, clip func(int) string, rate int, name string) error {
	if len(p.placements) == 0 || p.frames() == 0 {
		return nil
	}
	v, err := writeVoice(ctx, p.placements, clip, rate, p.fromMS, p.toMS, name+".wav")
	if err != nil {
		return err
	}
	defer os.Remove(v.path)
	n := strconv.FormatInt(p.frames(), 10)
	args, err := inputArgs(v.path, "wav")
	if err != nil {
		return err
	}
	graph := v.graph(1) + "[voice]apad=whole_len=" + n + ",atrim=end_sample=" + n + "[out]"
	bg := p.soundtrack
	if bg != nil {
		orig, err := inputArgs(bg.original, "")
		if err != nil {
			return err
		}
		args = append(args, orig...)
		graph += ";[1:a:0]" + soundtrackFilter(bg.channels, msToFrames(int64(p.toMS), mixRate)) + "[bg]"
	}
	args = append(args, "-filter_complex", graph, "-map", "[out]", "-c:a", "pcm_s16le")
	args = append(args, outputArgs("s16le", "file:"+name+".raw")...)
	if bg != nil {
		args = append(args, "-map", "[bg]", "-c:a", "pcm_s16le")
		args = append(args, outputArgs("s16le", "file:"+bg.raw)...)
	}
	if stderr, err := runFFmpeg(ctx, args...); err != nil {
		if bg != nil {
			return classifyFFmpegError(bg.original, stderr, fmt.Errorf("stretch and soundtrack: %w", err))
		}
		return classifyFFmpegError(v.path, stderr, fmt.Errorf("stretch: %w", err))
	}
	p.raw, p.v = name+".raw", v
	return nil
}

// sharedSoundtrack returns the soundtrack that the voice's only part
// decoded, once that part is made; nil when the voice is made otherwise.
func (s *voiceStream) sharedSoundtrack(ctx context.Context) (*ffmpegStream, error) {
	if len(s.parts) != 1 || s.parts[0].soundtrack == nil {
		return nil, nil
	}
	p := s.parts[0]
	select {
	case <-p.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if p.err != nil {
		return nil, p.err
	}
	return openPCMFile(p.soundtrack.raw)
}

// read fills dst with the next frames of the voice, waiting for the part
// they are in.
func (s *voiceStream) read(ctx context.Context, dst []float32) error {
	for len(dst) > 0 {
		if s.left == 0 {
			if err := s.open(ctx); err != nil {
				return err
			}
			continue
		}
		n := int(min(int64(len(dst)), s.left))
		if s.zero {
			clear(dst[:n])
		} else if err := s.file.read(dst[:n]); err != nil {
			return fmt.Errorf("read %s: %w", s.parts[s.next-1].raw, err)
		}
		dst, s.left = dst[n:], s.left-int64(n)
	}
	return nil
}

// open waits for the next part and starts reading it.
func (s *voiceStream) open(ctx context.Context) error {
	if s.closer != nil {
		s.closer.Close()
		s.closer = nil
	}
	if s.next == len(s.parts) {
		return io.ErrUnexpectedEOF
	}
	p := s.parts[s.next]
	s.next++
	select {
	case <-p.ready:
	case <-ctx.Done():
		return ctx.Err()
	}
	if p.err != nil {
		return p.err
	}
	s.left, s.zero = p.frames(), p.raw == ""
	if p.v != nil {
		s.stretched, s.pieces = s.stretched+p.v.stretched(), s.pieces+len(p.v.pieces)
	}
	if s.zero {
		return nil
	}
	f, err := os.Open(p.raw)
	if err != nil {
		return err
	}
	s.file, s.closer = newSampleReader(f, 16), f
	return nil
}

// wait waits for every part to be made and closes the file being read.
func (s *voiceStream) wait() {
	s.done.Wait()
	if s.closer != nil {
		s.closer.Close()
	}
}
