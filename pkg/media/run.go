package media

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/fault"
)

const (
	// probeTimeout bounds one ffprobe run when the caller's context allows longer.
	probeTimeout = 60 * time.Second
	// ffmpegTimeout bounds one ffmpeg run when the caller's context allows longer.
	ffmpegTimeout = 30 * time.Minute
	// stderrLimit is how many trailing bytes of a tool's stderr are kept.
	stderrLimit = 4 << 10
	// reportLimit is how much of stderr is kept when a filter reports its
	// results in the log: volumedetect prints up to ~90 histogram lines
	// (~6 KB) after its mean and max.
	reportLimit = 64 << 10
	// stdoutLimit bounds what is kept of a tool's stdout (ffprobe's JSON).
	stdoutLimit = 8 << 20
	// threads is the codec thread count: the workers run on small machines
	// next to other workers, so one ffmpeg never takes more than two cores.
	threads = "2"
)

// inputFormats is the demuxer whitelist for untrusted inputs: common
// containers only. Playlist and indirection demuxers (hls, dash, concat,
// image2 patterns, ffconcat, tee, ...) are absent, so no input can make
// ffmpeg open another file or a network address.
const inputFormats = "mov,mp4,m4a,3gp,3g2,mj2,matroska,webm,avi,flv,mpegts,mpeg,wav,mp3,aac,ogg,flac,asf"

// ErrUnsafePath is returned for a path that ffmpeg could read as something
// other than a local regular file: a URL or protocol prefix, an option, a
// device, a directory.
var ErrUnsafePath = errors.New("unsafe media path")

// urlLike matches a scheme or ffmpeg protocol prefix such as "http:",
// "concat:" or "file:".
var urlLike = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.\-]*:`)

// localInput checks that path names an existing regular local file and
// returns the form to hand to ffmpeg: "file:" and an absolute path, which
// ffmpeg can read neither as an option nor as another protocol.
func localInput(path string) (string, error) {
	if err := checkPathSyntax(path); err != nil {
		return "", err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("stat %q: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return "", fault.Permanent(fmt.Errorf("%w: %q is not a regular file", ErrUnsafePath, path))
	}
	return fileURL(path)
}

// localOutput checks an output path like localInput, except that the file
// need not exist yet.
func localOutput(path string) (string, error) {
	if err := checkPathSyntax(path); err != nil {
		return "", err
	}
	return fileURL(path)
}

func checkPathSyntax(path string) error {
	switch {
	case path == "":
		return fault.Permanent(fmt.Errorf("%w: empty path", ErrUnsafePath))
	case strings.HasPrefix(path, "-"):
		return fault.Permanent(fmt.Errorf("%w: %q looks like an option", ErrUnsafePath, path))
	case urlLike.MatchString(path):
		return fault.Permanent(fmt.Errorf("%w: %q looks like a URL, only local files are accepted", ErrUnsafePath, path))
	case strings.ContainsAny(path, "\x00\n\r"):
		return fault.Permanent(fmt.Errorf("%w: %q contains control characters", ErrUnsafePath, path))
	}
	return nil
}

func fileURL(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("resolve %q: %w", path, err)
	}
	return "file:" + abs, nil
}

// inputArgs returns the options and -i for one untrusted local input.
// format forces the demuxer when the caller knows it ("wav", "srt");
// empty lets ffmpeg probe among the whitelisted containers.
func inputArgs(path, format string) ([]string, error) {
	in, err := localInput(path)
	if err != nil {
		return nil, err
	}
	args := []string{"-threads", threads, "-protocol_whitelist", "file", "-format_whitelist", inputFormats}
	if format != "" {
		args = []string{"-threads", threads, "-protocol_whitelist", "file", "-f", format}
	}
	return append(args, "-i", in), nil
}

// outputArgs ends an ffmpeg command line: the encoders' thread limit, the
// muxer and the output URL (from localOutput or a temporary file).
func outputArgs(format, url string) []string {
	return []string{"-threads", threads, "-f", format, "-y", url}
}

// runFFmpeg runs ffmpeg with args after the fixed safety options and
// returns its (bounded) stderr. Non-zero exits become errors quoting stderr.
func runFFmpeg(ctx context.Context, args ...string) (string, error) {
	return runFFmpegLog(ctx, "error", args...)
}

// runFFmpegLog is runFFmpeg with another log level, for filters that report
// their results in the log (volumedetect).
func runFFmpegLog(ctx context.Context, level string, args ...string) (string, error) {
	base := []string{"-nostdin", "-hide_banner", "-nostats", "-loglevel", level, "-filter_threads", "1", "-filter_complex_threads", "1"}
	tail := stderrLimit
	if level != "error" {
		tail = reportLimit
	}
	_, stderr, err := runTail(ctx, ffmpegTimeout, tail, nil, "ffmpeg", append(base, args...)...)
	return stderr, err
}

// runFFprobe runs ffprobe on one untrusted input and returns its stdout.
func runFFprobe(ctx context.Context, path string, args ...string) ([]byte, string, error) {
	in, err := localInput(path)
	if err != nil {
		return nil, "", err
	}
	base := []string{"-hide_banner", "-loglevel", "error", "-protocol_whitelist", "file", "-format_whitelist", inputFormats}
	args = append(append(base, args...), in)
	return run(ctx, probeTimeout, nil, "ffprobe", args...)
}

// runFFprobeTo is runFFprobe writing its stdout to w as it comes (a
// source's packets are too many to keep).
func runFFprobeTo(ctx context.Context, path string, w io.Writer, args ...string) error {
	in, err := localInput(path)
	if err != nil {
		return err
	}
	base := []string{"-hide_banner", "-loglevel", "error", "-protocol_whitelist", "file", "-format_whitelist", inputFormats}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	stderr := &tailBuffer{limit: stderrLimit}
	cmd := &command{ctx: ctx, name: "ffprobe", args: append(append(base, args...), in), Stdout: w, Stderr: stderr}
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("ffprobe: %w", ctx.Err())
		}
		return fmt.Errorf("ffprobe: %w: %s", err, stderr.String())
	}
	return nil
}

// run executes name with args (never through a shell), bounded by limit or
// the caller's earlier deadline. Stdout is returned whole (ffprobe's JSON is
// small); stderr keeps only its last stderrLimit bytes.
func run(ctx context.Context, limit time.Duration, stdin io.Reader, name string, args ...string) ([]byte, string, error) {
	return runTail(ctx, limit, stderrLimit, stdin, name, args...)
}

// runTail is run keeping the last tail bytes of stderr.
func runTail(ctx context.Context, limit time.Duration, tail int, stdin io.Reader, name string, args ...string) ([]byte, string, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	stdout := &capBuffer{limit: stdoutLimit}
	stderr := &tailBuffer{limit: tail}
	// stdin nil reads from the null device
	cmd := &command{ctx: ctx, name: name, args: args, Stdin: stdin, Stdout: stdout, Stderr: stderr}
	err := cmd.Run()
	msg := stderr.String()
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, msg, fmt.Errorf("%s: %w", name, ctxErr)
		}
		if msg == "" {
			return nil, msg, fmt.Errorf("%s: %w", name, err)
		}
		return nil, msg, fmt.Errorf("%s: %w: %s", name, err, msg)
	}
	if stdout.over {
		return nil, msg, fmt.Errorf("%s: output exceeds %d bytes", name, stdoutLimit)
	}
	return stdout.Bytes(), msg, nil
}

// capBuffer keeps the first limit bytes written and notes an overflow,
// so a hostile file cannot make ffprobe's report exhaust memory.
type capBuffer struct {
	bytes.Buffer
	limit int
	over  bool
}

func (c *capBuffer) Write(p []byte) (int, error) {
	if room := c.limit - c.Len(); len(p) > room {
		c.over = true
		c.Buffer.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return c.Buffer.Write(p)
}

// tailBuffer is an io.Writer that keeps the last limit bytes written.
type tailBuffer struct {
	limit int
	buf   []byte
	cut   bool
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.limit; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
		t.cut = true
	}
	return n, nil
}

// String returns the kept text, trimmed, marked with "..." when cut.
func (t *tailBuffer) String() string {
	s := strings.TrimSpace(string(t.buf))
	if t.cut {
		s = "..." + s
	}
	return s
}

// ffmpegStream is an ffmpeg run whose output is read as it is written.
type ffmpegStream struct {
	io.Reader
	cmd    *command
	cancel context.CancelFunc
	stderr *tailBuffer
}

// startFFmpeg starts ffmpeg with args after the fixed safety options; its
// output "pipe:1" is read from the returned stream, which must be closed.
func startFFmpeg(ctx context.Context, args ...string) (*ffmpegStream, error) {
	ctx, cancel := context.WithTimeout(ctx, ffmpegTimeout)
	base := []string{"-nostdin", "-hide_banner", "-nostats", "-loglevel", "error", "-filter_threads", "1", "-filter_complex_threads", "1"}
	s := &ffmpegStream{cancel: cancel, stderr: &tailBuffer{limit: stderrLimit}}
	s.cmd = &command{ctx: ctx, name: "ffmpeg", args: append(base, args...), Stderr: s.stderr, pipeOut: true}
	if err := s.cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("ffmpeg: %w", err)
	}
	s.Reader = s.cmd.stdout
	return s, nil
}

// openPCMFile reads a file that an ffmpeg already wrote as the output of
// an ffmpegStream (Wait and Abort close it).
func openPCMFile(path string) (*ffmpegStream, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return &ffmpegStream{Reader: f, cancel: func() { f.Close() }, stderr: &tailBuffer{limit: stderrLimit}}, nil
}

// Wait reads what is left of the output, waits for ffmpeg to exit and
// returns its error, quoting its stderr.
func (s *ffmpegStream) Wait() error {
	defer s.cancel()
	if s.cmd == nil { // openPCMFile
		_, err := io.Copy(io.Discard, s.Reader)
		return err
	}
	_, copyErr := io.Copy(io.Discard, s.Reader)
	err := s.cmd.Wait()
	switch msg := s.stderr.String(); {
	case err != nil && msg != "":
		return fmt.Errorf("ffmpeg: %w: %s", err, msg)
	case err != nil:
		return fmt.Errorf("ffmpeg: %w", err)
	case copyErr != nil:
		return fmt.Errorf("ffmpeg: read output: %w", copyErr)
	}
	return nil
}

// Abort stops ffmpeg and waits for it to exit.
func (s *ffmpegStream) Abort() {
	s.cancel()
	if s.cmd != nil {
		_ = s.cmd.Wait()
	}
}
