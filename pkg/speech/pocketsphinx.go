package speech

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/fault"
)

// DefaultMaxSegment is the longest segment Pocketsphinx emits before it
// splits an utterance at its longest pause.
const DefaultMaxSegment = 9 * time.Second

// DefaultPocketsphinxSearch is the decoder search the embedded recogniser
// runs with (POCKETSPHINX_SEARCH): the first-pass tree search and the
// lattice's best path, without the second flat-lexicon pass, and at most
// 6000 active HMMs a frame (the package's default is 30000). On the
// fixtures it takes 0.57–0.61 of the decoder's CPU time (two_cities 14.2 →
// 8.7 CPU-s, jfk 6.4 → 3.7 under load) with the word error rate of
// two_cities 0.252 → 0.235 and of jfk 0.545 → 0.636 (two words of 22).
// 3000 HMMs halves the CPU but loses words in short chunks of noisy
// speech (the jfk clip in 5 s chunks: services/asr TestASRFansOut).
const DefaultPocketsphinxSearch = "-fwdflat no -maxhmmpf 6000"

// Pocketsphinx is the embedded English recogniser of a 16 kHz mono 16-bit
// WAV file (Debian packages pocketsphinx and pocketsphinx-en-us). Built
// with cgo and the tag pocketsphinx_lib (libpocketsphinx-dev; `make
// PS_LIB=auto` sets it when scripts/ps-lib.sh finds the library) it decodes in process with
// decoders kept loaded between files and tasks (Decoders of them at most),
// each file as pocketsphinx_continuous would; otherwise, or with Command
// set, it runs pocketsphinx_continuous for every file, loading the model
// each time (0.9–1.4 CPU-s and ~100 MB).
type Pocketsphinx struct {
	// Command is the program to run; "pocketsphinx_continuous" when empty.
	Command string
	// Search is the decoder's search options (flags and values separated
	// by blanks): DefaultPocketsphinxSearch when empty, "default" for the
	// package's own.
	Search string
	// ExtraArgs are appended to the command line (e.g. -hmm, -dict).
	ExtraArgs []string
	// FullLexicon has the decoder load the model's whole dictionary
	// rather than the entries its language model knows (lexiconArgs;
	// the same transcripts, a slower start).
	FullLexicon bool
	// MaxSegment bounds a segment's length; DefaultMaxSegment when zero.
	MaxSegment time.Duration
	// Decoders bounds the decoders kept loaded in this process (built
	// with the tag pocketsphinx_lib, Command empty); one more than
	// cores.Usable when zero. Each is freed after a minute without a file.
	// Built without it, or with Command set, every file runs Command.
	Decoders int
	// Stall bounds how long a loaded decoder's decode may go without
	// progress (no samples consumed, no model loaded, no utterance ended):
	// DefaultStall when zero. A stalled decode is abandoned and Transcribe
	// returns ErrStalled, marked fault.Unavailable. The command is bounded
	// by the step's timeout instead, which kills it.
	Stall time.Duration
	// OnStall, when set, is called with the error of every stalled decode
	// (ErrStalled), as it is given up: the decoder is stuck in this
	// process, which should be replaced.
	OnStall func(err error)

	// cmnMean, when set, is where the cepstral mean normalisation starts
	// instead of the model's -cmninit; cmnArgs make the command do so
	// (TranscribeAfter).
	cmnMean []float64
	cmnArgs []string
}

// NewPocketsphinx returns a Pocketsphinx with the defaults.
func NewPocketsphinx() *Pocketsphinx { return &Pocketsphinx{} }

// Transcribe implements Transcriber. Only English is supported; other
// languages are a permanent error naming ASR_ENGINE.
func (p *Pocketsphinx) Transcribe(ctx context.Context, wavPath, language string) ([]Segment, error) {
	if lang := baseLanguage(language); lang != "en" {
		return nil, fault.Permanent(fmt.Errorf("pocketsphinx: language %q: %w (the embedded recogniser knows English only; set ASR_ENGINE=openai for other languages)", language, ErrUnsupportedLanguage))
	}
	if err := checkASRInput(wavPath); err != nil {
		return nil, fmt.Errorf("pocketsphinx: %w", err)
	}
	out, err := p.decode(ctx, wavPath)
	if err != nil {
		err = fmt.Errorf("pocketsphinx: %w", err)
		if errors.Is(err, ErrStalled) && p.OnStall != nil {
			p.OnStall(err)
		}
		return nil, err
	}
	maxSeg := p.MaxSegment
	if maxSeg <= 0 {
		maxSeg = DefaultMaxSegment
	}
	return parsePocketsphinx(out, int(maxSeg/time.Millisecond)), nil
}

// Resident reports whether Transcribe decodes with decoders kept loaded
// in this process rather than running a command per file.
func (p *Pocketsphinx) Resident() bool { return residentLoaded && p.Command == "" }

// decode returns what pocketsphinx_continuous -time yes prints for
// wavPath: from a loaded decoder when Resident, else from the command.
// Under a Yielding ctx (a long recording's chunk) either decodes at the
// lower priority the context asks for, so that a short task's decode
// still goes first: the command as a niced process, the loaded decoder on
// a niced thread of its own (see decoderPool.transcribe).
func (p *Pocketsphinx) decode(ctx context.Context, wavPath string) (string, error) {
	model := p.modelArgs()
	if p.Resident() {
		return sharedPool(model, p.Decoders).transcribe(ctx, wavPath, p.cmnMean, niceOf(ctx), p.Stall)
	}
	cmdName := p.Command
	if cmdName == "" {
		cmdName = "pocketsphinx_continuous"
	}
	args := append(append([]string{"-infile", wavPath, "-time", "yes", "-logfn", os.DevNull}, model...), p.cmnArgs...)
	out, err := run(ctx, nil, cmdName, args...)
	return string(out), err
}

// modelArgs are the search, ExtraArgs and (without Command or
// FullLexicon) the trimmed dictionary: what a decoder is loaded with.
func (p *Pocketsphinx) modelArgs() []string {
	model := append(p.searchArgs(), p.ExtraArgs...)
	if p.Command == "" && !p.FullLexicon {
		model = append(model, lexiconArgs(model)...)
	}
	return model
}

// searchArgs is Search as arguments.
func (p *Pocketsphinx) searchArgs() []string {
	switch p.Search {
	case "":
		return strings.Fields(DefaultPocketsphinxSearch)
	case "default":
		return nil
	}
	return strings.Fields(p.Search)
}

// checkASRInput makes sure path is a 16 kHz mono 16-bit PCM WAV file; any
// other file is a permanent error (resampling is extract_audio's job).
func checkASRInput(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	h, err := readWAVHeader(f)
	if err != nil {
		return fault.Permanent(fmt.Errorf("read %s: %w", path, err))
	}
	if h.SampleRate != 16000 || h.Channels != 1 || h.BitsPerSample != 16 {
		return fault.Permanent(fmt.Errorf("%s is %d Hz, %d channels, %d bit: want 16000 Hz mono 16 bit: %w", path, h.SampleRate, h.Channels, h.BitsPerSample, ErrNotWAV))
	}
	return nil
}

// run executes a tool without a shell, feeding stdin, and returns its
// standard output. A missing tool is permanent (the image lacks a
// package); a tool that exits non-zero is transient, with the end of its
// standard error in the message.
func run(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second
	err := startYielding(ctx, cmd)
	if err == nil {
		err = cmd.Wait()
	}
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, fmt.Errorf("run %s: %w", name, ctxErr)
		}
		if errors.Is(err, exec.ErrNotFound) {
			return nil, fault.Permanent(fmt.Errorf("run %s: %w (install the Debian package that provides it)", name, err))
		}
		return nil, fmt.Errorf("run %s: %w: %s", name, err, snippet(tail(stderr.Bytes(), 600)))
	}
	return stdout.Bytes(), nil
}

// tail returns at most the last n bytes of b.
func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// parsePocketsphinx turns pocketsphinx_continuous -time yes output into
// segments: one per utterance (between <s> and </s>), split at the longest
// pause while longer than maxMS. Fillers (<sil>, [NOISE], ++GARBAGE++) are
// dropped and alternate pronunciations ("our(3)") lose their suffix. Lines
// that are not "word start end confidence" (the utterance text lines) are
// ignored, as the word lines carry everything.
func parsePocketsphinx(out string, maxMS int) []Segment {
	var segs []Segment
	var words []Word
	flush := func() {
		// pocketsphinx prints words in time order; sorting guards the
		// segment bounds against any output that is not.
		slices.SortStableFunc(words, func(a, b Word) int { return a.StartMS - b.StartMS })
		segs = append(segs, splitUtterance(words, maxMS)...)
		words = nil
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) != 4 {
			continue
		}
		start, err1 := strconv.ParseFloat(f[1], 64)
		end, err2 := strconv.ParseFloat(f[2], 64)
		conf, err3 := strconv.ParseFloat(f[3], 64)
		if err1 != nil || err2 != nil || err3 != nil || !finite(start, end, conf) || start < 0 || end < start || end > 1e7 {
			continue
		}
		switch f[0] {
		case "<s>":
			flush()
			continue
		case "</s>":
			flush()
			continue
		}
		text := cleanWord(f[0])
		if text == "" {
			continue
		}
		words = append(words, Word{
			StartMS:    int(math.Round(start * 1000)),
			EndMS:      int(math.Round(end * 1000)),
			Text:       text,
			Confidence: math.Max(0, math.Min(1, conf)),
		})
	}
	flush()
	return segs
}

// finite reports whether every value is a finite number.
func finite(vs ...float64) bool {
	for _, v := range vs {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
	}
	return true
}

// cleanWord strips an alternate-pronunciation suffix and returns "" for
// fillers and silence.
func cleanWord(w string) string {
	if strings.HasPrefix(w, "<") || strings.HasPrefix(w, "[") || strings.HasPrefix(w, "++") {
		return ""
	}
	if i := strings.LastIndexByte(w, '('); i > 0 && strings.HasSuffix(w, ")") {
		if _, err := strconv.Atoi(w[i+1 : len(w)-1]); err == nil {
			w = w[:i]
		}
	}
	return w
}

// splitUtterance makes segments of an utterance's words, splitting at the
// widest gap between words while a segment is longer than maxMS.
func splitUtterance(words []Word, maxMS int) []Segment {
	if len(words) == 0 {
		return nil
	}
	start, end := words[0].StartMS, words[len(words)-1].EndMS
	if end-start <= maxMS || len(words) == 1 {
		texts := make([]string, len(words))
		for i, w := range words {
			texts[i] = w.Text
			end = max(end, w.EndMS)
		}
		return []Segment{{StartMS: start, EndMS: end, Text: strings.Join(texts, " "), Words: words}}
	}
	cut, widest := len(words)/2, -1
	for i := 1; i < len(words); i++ {
		if gap := words[i].StartMS - words[i-1].EndMS; gap > widest {
			cut, widest = i, gap
		}
	}
	head := splitUtterance(words[:cut:cut], maxMS)
	return append(head, splitUtterance(words[cut:], maxMS)...)
}

// CheckPocketsphinxSearch reports a search setting that is not "default"
// or pairs of a flag and its value, or that sets what Transcribe sets.
func CheckPocketsphinxSearch(search string) error {
	if search == "" || search == "default" {
		return nil
	}
	f := strings.Fields(search)
	if len(f)%2 != 0 {
		return fmt.Errorf("POCKETSPHINX_SEARCH %q: want pairs of a flag and its value, or \"default\"", search)
	}
	for i := 0; i < len(f); i += 2 {
		if !strings.HasPrefix(f[i], "-") || slices.Contains([]string{"-infile", "-time", "-argfile"}, f[i]) || slices.Contains(processWideFlags, f[i]) {
			return fmt.Errorf("POCKETSPHINX_SEARCH %q: %q is not a search flag", search, f[i])
		}
	}
	return nil
}

// processWideFlags set what pocketsphinx keeps for the whole process
// rather than for one decoder (see libMu): -logfn opens the process's log
// file and closes the one before it, -debug sets the process's debug
// level, -dither draws every frame's noise from the process's random
// generator. A decoder loaded in process refuses them (psCheckArgs); the
// command, a process of its own, gets -logfn from Pocketsphinx itself.
var processWideFlags = []string{"-logfn", "-debug", "-dither"}

// psCheckArgs refuses the arguments of a decoder loaded in process that
// would set the library's process-wide state (processWideFlags).
func psCheckArgs(args []string) error {
	for _, a := range args {
		if slices.Contains(processWideFlags, a) {
			return fmt.Errorf("pocketsphinx: %s sets what every decoder of the process shares; a decoder loaded in process takes no %v", a, processWideFlags)
		}
	}
	return nil
}
