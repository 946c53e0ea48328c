package speech

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/dubflow/dubflow/pkg/fault"
)

// Apertium is the embedded translator: it runs `apertium -u <mode>`
// (Debian packages apertium and apertium-eng-spa, which install the modes
// eng-spa and spa-eng). Languages are given as ISO 639-1 codes ("en", "es")
// and mapped to Apertium's three-letter mode names. One call translates a
// whole batch: the texts go in as paragraphs separated by blank lines,
// which Apertium's text deformatter treats as block boundaries (no rule
// reaches across them, no word is moved over them) and copies through.
//
// The translation pipelines are kept running between calls (see
// apertium_pipe.go): a call then costs the translating, not the start of a
// dozen programs loading their language data. Close stops them; they also
// stop on their own after IdleTimeout unused, and with the process.
type Apertium struct {
	// Command is the program to run once per call, instead of the
	// long-lived pipelines; "apertium" when empty (then the pipelines
	// are used).
	Command string
	// Pipelines bounds the pipelines kept per language pair, as many calls
	// translating at once (others wait for one); 1 when zero; negative
	// runs `apertium` once per call instead. A pipeline holds the pair's
	// language data, about 180 MB of resident memory for eng-spa, as one
	// `apertium` call does while it runs.
	Pipelines int
	// IdleTimeout stops a pipeline unused this long; a minute when zero.
	IdleTimeout time.Duration
	// ModesDir holds the installed modes (<pair>.mode);
	// /usr/share/apertium/modes when empty. A pair without a mode file
	// there runs `apertium` once per call.
	ModesDir string

	mu      sync.Mutex
	pools   map[string]*pipePool
	closed  bool
	started int
}

// NewApertium returns an Apertium with the defaults.
func NewApertium() *Apertium { return &Apertium{} }

// blankLines matches the separator between paragraphs in Apertium's output.
var blankLines = regexp.MustCompile(`\n[ \t\r]*\n\s*`)

// Translate implements Translator. A pair without an installed mode is a
// permanent error naming TRANSLATE_ENGINE; a different number of
// paragraphs back is an error wrapping ErrCountMismatch.
func (a *Apertium) Translate(ctx context.Context, texts []string, from, to string) ([]string, error) {
	mode := iso3(from) + "-" + iso3(to)
	if !validMode(mode) {
		return nil, a.unsupported(from, to)
	}
	out := make([]string, len(texts))
	var idx []int
	var paras []string
	for i, t := range texts {
		if t = oneLine(t); t != "" {
			idx = append(idx, i)
			paras = append(paras, t)
		}
	}
	if len(paras) == 0 {
		return out, nil
	}
	in := []byte(strings.Join(paras, "\n\n") + "\n")
	var res []byte
	var err error
	if f := a.modeFile(mode); a.Command == "" && a.Pipelines >= 0 && f != "" {
		res, err = a.translatePiped(ctx, f, mode, in)
	} else {
		cmdName := a.Command
		if cmdName == "" {
			cmdName = "apertium"
		}
		res, err = run(ctx, in, cmdName, "-u", mode)
	}
	if err != nil {
		if strings.Contains(err.Error(), "does not exist") {
			return nil, a.unsupported(from, to)
		}
		return nil, fmt.Errorf("apertium %s: %w", mode, err)
	}
	got := blankLines.Split(strings.TrimSpace(string(res)), -1)
	if len(got) != len(paras) {
		return nil, fmt.Errorf("apertium %s: %d texts in, %d out: %w", mode, len(paras), len(got), ErrCountMismatch)
	}
	for j, i := range idx {
		out[i] = strings.TrimSpace(got[j])
	}
	return out, nil
}

func (a *Apertium) unsupported(from, to string) error {
	return fault.Permanent(fmt.Errorf("apertium: pair %s→%s: %w (installed modes: `apertium -l`; install the apertium-<pair> package or set TRANSLATE_ENGINE=openai or apy)", from, to, ErrUnsupportedLanguage))
}

// validMode keeps anything that could be read as an option or a path out
// of the apertium command line.
var validMode = regexp.MustCompile(`^[a-z]{2,3}-[a-z]{2,3}$`).MatchString

// oneLine folds a text onto one line with single spaces, so that it stays
// one paragraph.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
