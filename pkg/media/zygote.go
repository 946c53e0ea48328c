package media

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"
)

// ZygoteLibrary is the file name of the fork server library
// (pkg/media/ffzygote/ffzygote.c), which `make build` and the images put
// next to the workers.
const ZygoteLibrary = "libffzygote.so"

// zygoteTools are the programs run through a fork server when the library
// is there: the ones whose start costs more than their work on a short
// clip (~0.13 CPU-s idle, ~0.3 on a loaded machine: 215 libraries, all
// bound at start) and that a worker runs again and again.
var zygoteTools = map[string]bool{"ffmpeg": true, "ffprobe": true}

// UseZygote chooses how this process runs ffmpeg and ffprobe (the
// FFMPEG_ZYGOTE setting, config.MediaTools): "off" as a new process for
// every job (the default until it is called); "" through the fork server
// library when it lies next to the running program (`make build` and the
// images put it there), else as "off"; a path names the library, which
// must exist. It returns the library used, "" for none. A server that
// does not start is reported on logger.
func UseZygote(setting string, logger zerolog.Logger) (string, error) {
	lib := ""
	switch setting = strings.TrimSpace(setting); setting {
	case "off":
	case "":
		exe, err := os.Executable()
		if err != nil {
			break
		}
		if p := filepath.Join(filepath.Dir(exe), ZygoteLibrary); fileExists(p) {
			lib = p
		}
	default:
		abs, err := filepath.Abs(setting)
		if err != nil || !fileExists(abs) {
			return "", fmt.Errorf("FFMPEG_ZYGOTE: no library %s (\"off\" starts ffmpeg anew for every job)", setting)
		}
		lib = abs
	}
	setZygoteLib(lib, logger)
	if lib != "" {
		logger.Info().Str("library", lib).Msg("ffmpeg and ffprobe run through fork servers (FFMPEG_ZYGOTE)")
	} else {
		logger.Info().Msg("ffmpeg and ffprobe start anew for every job (FFMPEG_ZYGOTE)")
	}
	return lib, nil
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// setZygoteLib makes lib ("" for none) the library of the servers started
// from now on, ending the ones started with another; logger reports
// the servers that do not start.
func setZygoteLib(lib string, logger zerolog.Logger) {
	zygotes.Lock()
	defer zygotes.Unlock()
	zygotes.log = logger
	if lib == zygotes.lib {
		return
	}
	for _, z := range zygotes.m {
		z.stop()
	}
	zygotes.lib, zygotes.m = lib, map[string]*zygote{}
}

// zygotes are the fork servers of this process, by program, started on
// first use.
var zygotes = struct {
	sync.Mutex
	lib string // the library to preload, "" for none (UseZygote)
	log zerolog.Logger
	m   map[string]*zygote
}{m: map[string]*zygote{}, log: zerolog.Nop()}

// zygoteFor returns the fork server for the program name, or nil when it
// runs as a new process per job (no library, another program, or its
// server could not start).
func zygoteFor(name string) *zygote {
	if !zygoteTools[name] {
		return nil
	}
	zygotes.Lock()
	defer zygotes.Unlock()
	if zygotes.lib == "" {
		return nil
	}
	z := zygotes.m[name]
	if z == nil {
		z = &zygote{name: name, lib: zygotes.lib, log: zygotes.log}
		zygotes.m[name] = z
	}
	if z.broken {
		return nil
	}
	return z
}

// zygote is a fork server: the program (ffmpeg) started once with the
// library preloaded, which loads and binds its libraries and then, instead
// of its main, waits on a control socket; for each job it forks, and the
// child runs the program's main with the job's arguments, working
// directory and standard streams. A job is a process of its own as before
// (a crash or a kill ends that job only), minus the start.
type zygote struct {
	name, lib string
	log       zerolog.Logger

	mu     sync.Mutex
	ctl    *net.UnixConn // nil until started
	done   chan struct{} // closed when the server process has ended
	broken bool          // it did not start: run the program per job
	proc   *os.Process
}

// stop ends the server, if one runs (it ends when its control socket
// closes; its running jobs are killed with it).
func (z *zygote) stop() {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.ctl != nil {
		z.ctl.Close()
		<-z.done
		z.ctl = nil
	}
}

// pid is the server's process id, 0 when none runs.
func (z *zygote) pid() int {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.ctl == nil || z.proc == nil {
		return 0
	}
	return z.proc.Pid
}

// zygoteReady bounds the server's start (loading ffmpeg's libraries).
const zygoteReady = 10 * time.Second

// control returns the control socket of a running server, starting one
// when there is none or the last one ended.
func (z *zygote) control() (*net.UnixConn, error) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.ctl != nil {
		select {
		case <-z.done:
			z.ctl.Close()
			z.ctl = nil
		default:
			return z.ctl, nil
		}
	}
	ctl, proc, done, err := z.start()
	if err != nil {
		z.broken = true
		z.log.Warn().Err(err).Str("tool", z.name).Str("library", z.lib).
			Msg("fork server did not start: the tool starts anew for every job")
		return nil, err
	}
	z.ctl, z.proc, z.done = ctl, proc, done
	return ctl, nil
}

// start runs the server and waits for the byte it sends when it serves.
func (z *zygote) start() (*net.UnixConn, *os.Process, chan struct{}, error) {
	path, err := exec.LookPath(z.name)
	if err != nil {
		return nil, nil, nil, err
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("control socket: %w", err)
	}
	theirs := os.NewFile(uintptr(fds[1]), "zygote-control")
	ctl, err := unixConn(fds[0], "zygote-control")
	if err != nil {
		theirs.Close()
		return nil, nil, nil, err
	}
	cmd := exec.Command(path)
	preload := z.lib
	if old := os.Getenv("LD_PRELOAD"); old != "" {
		preload += " " + old
	}
	cmd.Env = append(os.Environ(), "LD_PRELOAD="+preload, "DUBFLOW_ZYGOTE_FD=3", "DUBFLOW_ZYGOTE_TOOL="+z.name)
	cmd.ExtraFiles = []*os.File{theirs}
	stderr := &tailBuffer{limit: stderrLimit}
	cmd.Stderr = stderr
	cmd.Dir = "/"
	err = cmd.Start()
	theirs.Close() // the server's end is the server's alone: its exit ends the socket
	if err != nil {
		ctl.Close()
		return nil, nil, nil, err
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	_ = ctl.SetReadDeadline(time.Now().Add(zygoteReady))
	var ready [1]byte
	if n, err := ctl.Read(ready[:]); n != 1 || err != nil {
		_ = cmd.Process.Kill()
		<-done
		ctl.Close()
		return nil, nil, nil, fmt.Errorf("%s with %s sent no ready byte (%v): %s", z.name, z.lib, err, stderr.String())
	}
	_ = ctl.SetReadDeadline(time.Time{})
	return ctl, cmd.Process, done, nil
}

// unixConn wraps a socket of this process as a *net.UnixConn (deadlines,
// CloseWrite, descriptors in messages), closing fd.
func unixConn(fd int, name string) (*net.UnixConn, error) {
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return c.(*net.UnixConn), nil
}

// errNotStarted says that the server took no job: nothing ran, so the
// caller runs the program itself.
var errNotStarted = errors.New("fork server took no job")

// zygoteMaxArgs is the library's bound on a job's arguments (MAX_ARGS).
const zygoteMaxArgs = 1 << 20

// zjob is one job of a fork server.
type zjob struct {
	reply *net.UnixConn
	pid   int
}

// run hands the server a job: argv (the program's name first), the working
// directory and the three standard streams, which it passes to the child.
// It returns errNotStarted when the job did not start.
func (z *zygote) run(dir string, argv []string, stdio [3]*os.File) (*zjob, error) {
	blob := dir + "\x00" + strings.Join(argv, "\x00") + "\x00"
	if len(blob) > zygoteMaxArgs || strings.Count(blob, "\x00") != len(argv)+1 {
		return nil, errNotStarted // too long, or a NUL in an argument: os/exec decides
	}
	ctl, err := z.control()
	if err != nil {
		return nil, errNotStarted
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("reply socket: %w", err)
	}
	theirs := os.NewFile(uintptr(fds[1]), "zygote-reply")
	reply, err := unixConn(fds[0], "zygote-reply")
	if err != nil {
		theirs.Close()
		return nil, err
	}
	rights := syscall.UnixRights(int(theirs.Fd()), int(stdio[0].Fd()), int(stdio[1].Fd()), int(stdio[2].Fd()))
	_, _, err = ctl.WriteMsgUnix([]byte{0}, rights, nil)
	theirs.Close()
	if err != nil {
		reply.Close()
		return nil, errNotStarted
	}
	msg := make([]byte, 4+len(blob))
	binary.LittleEndian.PutUint32(msg, uint32(len(blob)))
	copy(msg[4:], blob)
	// The server reads the arguments and forks, or closes the socket
	// without forking (EOF: the caller runs the tool itself). A server too
	// slow to answer may still fork: closing the socket then kills that
	// job, and this one fails (the step is tried again) rather than run the
	// tool a second time beside it.
	_ = reply.SetDeadline(time.Now().Add(zygoteReady))
	var pid [4]byte
	_, err = reply.Write(msg)
	if err == nil {
		_, err = io.ReadFull(reply, pid[:])
	}
	if err != nil {
		reply.Close()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, fmt.Errorf("%s fork server: no answer within %s", z.name, zygoteReady)
		}
		return nil, errNotStarted
	}
	_ = reply.SetDeadline(time.Time{})
	return &zjob{reply: reply, pid: int(int32(binary.LittleEndian.Uint32(pid[:])))}, nil
}

// wait returns the job's wait status once it has ended. Cancelling ctx
// makes the server kill the job (this end stops writing); wait still
// returns only once it has ended.
func (j *zjob) wait(ctx context.Context) (syscall.WaitStatus, error) {
	defer j.reply.Close()
	stop := context.AfterFunc(ctx, func() { _ = j.reply.CloseWrite() })
	defer stop()
	var st [4]byte
	if _, err := io.ReadFull(j.reply, st[:]); err != nil {
		return 0, fmt.Errorf("fork server ended while job %d ran: %w", j.pid, err)
	}
	return syscall.WaitStatus(binary.LittleEndian.Uint32(st[:])), nil
}

// ExitError is a tool's exit other than success: its status (an exit
// code, or the signal that ended it), whether it ran as its own process
// or in a fork server.
type ExitError struct {
	Status syscall.WaitStatus
}

// Exited reports whether the tool ended by itself (not by a signal).
func (e *ExitError) Exited() bool { return e.Status.Exited() }

func (e *ExitError) Error() string {
	if e.Status.Signaled() {
		return "signal: " + e.Status.Signal().String()
	}
	return fmt.Sprintf("exit status %d", e.Status.ExitStatus())
}

// command is one run of a tool: by its fork server when it has one
// (zygoteFor), else as a new process (os/exec), with the same streams,
// cancellation and errors either way.
type command struct {
	ctx  context.Context
	name string
	args []string
	// Stdin is read by the tool (nil: the null device); Stdout and Stderr
	// get what it writes (nil: discarded) unless pipeOut asks for a pipe
	// to read stdout from (stdout, after Start; Wait closes it).
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	pipeOut        bool
	stdout         io.ReadCloser

	cmd     *exec.Cmd      // os/exec
	job     *zjob          // fork server
	ours    []*os.File     // this process's ends of the job's pipes
	copying sync.WaitGroup // copies from the pipes to Stdout and Stderr
}

// waitDelay bounds the wait for a tool's output to end after it exited
// (exec.Cmd.WaitDelay).
const waitDelay = 5 * time.Second

// Run starts the tool and waits for it.
func (c *command) Run() error {
	if err := c.Start(); err != nil {
		return err
	}
	return c.Wait()
}

// Start starts the tool.
func (c *command) Start() error {
	if z := zygoteFor(c.name); z != nil {
		err := c.startJob(z)
		if !errors.Is(err, errNotStarted) {
			if err == nil {
				yield(c.ctx, c.job.pid)
			}
			return err
		}
	}
	cmd := exec.CommandContext(c.ctx, c.name, c.args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.Stdin, c.Stdout, c.Stderr
	cmd.WaitDelay = waitDelay
	if c.pipeOut {
		out, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		c.stdout = out
	}
	c.cmd = cmd
	if err := cmd.Start(); err != nil {
		return err
	}
	yield(c.ctx, cmd.Process.Pid)
	return nil
}

// startJob starts the tool in its fork server; errNotStarted when the
// server took no job (the caller then runs it itself).
func (c *command) startJob(z *zygote) error {
	dir, err := os.Getwd()
	if err != nil {
		return errNotStarted
	}
	s, err := c.jobStreams()
	if err != nil {
		return err
	}
	defer s.closeTheirs() // the server has its own copies once it took the job
	job, err := z.run(dir, append([]string{c.name}, c.args...), s.stdio)
	if err != nil {
		s.closeOurs()
		return err
	}
	c.job, c.ours, c.stdout = job, s.ours, s.stdout
	if s.feed != nil {
		// Not waited for, as os/exec does not wait for it either: a Stdin
		// that never ends must not hold Wait once the tool has ended.
		go s.feed()
	}
	for _, f := range s.copies {
		c.copying.Go(f)
	}
	return nil
}

// jobStreams are a job's standard streams as the server hands them to the
// child (stdio): the child's ends, which this process closes once the
// server has them (theirs); this process's ends (ours); the feed of Stdin
// into its pipe and the copies from the output pipes, run once the job
// started; and stdout's read end when the caller reads it (pipeOut).
type jobStreams struct {
	stdio        [3]*os.File
	theirs, ours []*os.File
	feed         func()
	copies       []func()
	stdout       io.ReadCloser
}

func (c *command) jobStreams() (*jobStreams, error) {
	s := &jobStreams{}
	fail := func(err error) (*jobStreams, error) {
		s.closeTheirs()
		s.closeOurs()
		return nil, err
	}
	switch in := c.Stdin.(type) {
	case nil:
		f, err := os.Open(os.DevNull)
		if err != nil {
			return fail(err)
		}
		s.theirs, s.stdio[0] = append(s.theirs, f), f
	case *os.File:
		s.stdio[0] = in
	default:
		r, w, err := os.Pipe()
		if err != nil {
			return fail(err)
		}
		s.theirs, s.stdio[0], s.ours = append(s.theirs, r), r, append(s.ours, w)
		s.feed = func() {
			_, _ = io.Copy(w, in) // a tool that stops reading ends the copy (EPIPE), as with os/exec
			w.Close()
		}
	}
	for i, dst := range []io.Writer{c.Stdout, c.Stderr} {
		f, err := s.output(dst, i == 0 && c.pipeOut)
		if err != nil {
			return fail(err)
		}
		s.stdio[1+i] = f
	}
	return s, nil
}

// output returns the child's end of an output stream: dst itself when it
// is a file, the null device when it is nil (and not piped), else a pipe
// whose read end is copied to dst, or kept as stdout when piped.
func (s *jobStreams) output(dst io.Writer, piped bool) (*os.File, error) {
	if f, ok := dst.(*os.File); ok {
		return f, nil
	}
	if dst == nil && !piped {
		f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			return nil, err
		}
		s.theirs = append(s.theirs, f)
		return f, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	s.theirs, s.ours = append(s.theirs, w), append(s.ours, r)
	if dst == nil {
		s.stdout = r
	} else {
		s.copies = append(s.copies, func() { _, _ = io.Copy(dst, r) })
	}
	return w, nil
}

func (s *jobStreams) closeTheirs() {
	for _, f := range s.theirs {
		f.Close()
	}
}

func (s *jobStreams) closeOurs() {
	for _, f := range s.ours {
		f.Close()
	}
}

// Wait waits for the tool to end and for its output; an exit other than
// success is an *ExitError.
func (c *command) Wait() error {
	if c.cmd != nil {
		err := c.cmd.Wait()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			if st, ok := exit.Sys().(syscall.WaitStatus); ok {
				return &ExitError{Status: st}
			}
		}
		return err
	}
	st, err := c.job.wait(c.ctx)
	copied := make(chan struct{})
	go func() {
		c.copying.Wait()
		close(copied)
	}()
	select {
	case <-copied:
	case <-time.After(waitDelay): // something else holds the pipes open
	}
	for _, f := range c.ours {
		f.Close() // ends a copy still reading, and stdin's feed
	}
	<-copied
	switch {
	case err != nil:
		return fmt.Errorf("%s: %w", c.name, err)
	case st != 0:
		return &ExitError{Status: st}
	}
	return nil
}
