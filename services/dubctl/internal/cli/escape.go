package cli

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/dubflow/dubflow/pkg/textrule"
)

// What dubctl prints comes in good part from people and engines: file
// names, glossary terms, translations, error texts of engines and of
// ffmpeg, cancel reasons. A control character in it (an escape sequence)
// would restyle or clear the operator's terminal, a bidirectional override
// (U+202E) reorder what follows it on screen. dubctl escapes them on the
// way out, in every command and both modes: every character pkg/dub's
// text rule refuses (textrule.Unsafe) is written as \uXXXX (valid inside a JSON
// string, so --json stays JSON with the same values) and a byte that is
// not UTF-8 as \xHH. Line feeds and tabs between the lines and columns
// dubctl writes itself pass; inside a table's cell they are escaped too.

// escaper writes to w with what dubctl prints escaped (see above).
type escaper struct{ w io.Writer }

// newEscaper wraps w; raw (the progress bar) reaches w itself.
func newEscaper(w io.Writer) *escaper { return &escaper{w: w} }

// Write writes p with the unsafe characters escaped; it reports len(p)
// when all of it was written.
func (e *escaper) Write(p []byte) (int, error) {
	if _, err := io.WriteString(e.w, escapeText(string(p), "\n\t")); err != nil {
		return 0, err
	}
	return len(p), nil
}

// raw is the writer under e.
func (e *escaper) raw() io.Writer { return e.w }

// RawWriter returns the writer under an escaper (for output dubctl
// writes control characters into itself: a progress bar), else w.
func RawWriter(w io.Writer) io.Writer {
	if e, ok := w.(*escaper); ok {
		return e.raw()
	}
	return w
}

// escapeText returns s with every character textrule.Unsafe names, except
// those in keep, written as \uXXXX, and every byte that is not UTF-8 as
// \xHH.
func escapeText(s string, keep string) string {
	if clean(s, keep) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case textrule.Unsafe(r) && !strings.ContainsRune(keep, r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// clean reports whether s needs no escaping.
func clean(s, keep string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= utf8.RuneSelf || c < 0x20 || c == 0x7f {
			return utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool {
				return textrule.Unsafe(r) && !strings.ContainsRune(keep, r)
			})
		}
	}
	return true
}

// Cell is a value as a table cell prints it: on one line, every unsafe
// character escaped (tabs and line feeds too).
func Cell(v any) string { return escapeText(fmt.Sprint(v), "") }
