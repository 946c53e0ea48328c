// Package glossary reads a task's glossary as people give it: a CSV file
// of terms ("source,target"), or terms an outside publisher sent already
// parsed. Every term follows the text rule (pkg/textrule) and the limits
// the wire contract states. The doors (pkg/admit) and the workers apply it;
// pkg/dub stores a task's glossary and reads it back.
package glossary

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dubflow/dubflow/pkg/textrule"
	"github.com/dubflow/dubflow/pkg/wire"
)

// Limits of a glossary, as proto/extract_audio.schema.json states them.
const (
	MaxTerms      = 1000
	MaxTermLength = 200
)

// ErrInvalid is returned for a glossary that cannot be used.
var ErrInvalid = errors.New("invalid glossary")

// ParseCSV reads a glossary as CSV: one term a line, "source,target"
// (an empty or missing target keeps the term as it is). A byte-order mark
// at the start (what spreadsheets write) is skipped; a first line
// "source,target" is a header and skipped; blank lines and lines starting
// with '#' are skipped. Refused with the number of the line (from 1, as an
// editor counts): bytes that are not UTF-8, a term that breaks the text
// rule (textrule.Check), more than two fields, a term over MaxTermLength
// characters, and a source term given again (case-insensitively) — which
// of the two was meant cannot be known.
func ParseCSV(r io.Reader) ([]wire.Term, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	b = bytes.TrimPrefix(b, []byte("\uFEFF"))
	if line := invalidLine(b); line > 0 {
		return nil, fmt.Errorf("%w: line %d: not valid UTF-8; save the file as UTF-8", ErrInvalid, line)
	}
	cr := csv.NewReader(bytes.NewReader(b))
	cr.FieldsPerRecord = -1
	cr.Comment = '#'
	cr.TrimLeadingSpace = true
	var terms []wire.Term
	seen := map[string]int{} // lower-cased source → its line
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		line, _ := cr.FieldPos(0)
		t, err := termOf(rec)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrInvalid, line, err)
		}
		if t.Source == "" || len(terms) == 0 && strings.EqualFold(t.Source, "source") && strings.EqualFold(t.Target, "target") {
			continue
		}
		key := strings.ToLower(t.Source)
		if first, ok := seen[key]; ok {
			return nil, fmt.Errorf("%w: line %d: source term %s is already on line %d; give each term once",
				ErrInvalid, line, quoteShort(t.Source), first)
		}
		seen[key] = line
		terms = append(terms, t)
	}
	if len(terms) > MaxTerms {
		return nil, fmt.Errorf("%w: %d terms, at most %d", ErrInvalid, len(terms), MaxTerms)
	}
	return terms, nil
}

// invalidLine is the number of the first line of b that is not valid
// UTF-8, 0 when all of b is.
func invalidLine(b []byte) int {
	if utf8.Valid(b) {
		return 0
	}
	for i, l := range bytes.SplitAfter(b, []byte("\n")) {
		if !utf8.Valid(l) {
			return i + 1
		}
	}
	return 0
}

// termOf reads one CSV record.
func termOf(rec []string) (wire.Term, error) {
	if len(rec) > 2 {
		return wire.Term{}, fmt.Errorf("%d fields, want source,target", len(rec))
	}
	var t wire.Term
	t.Source = strings.TrimSpace(rec[0])
	if len(rec) == 2 {
		t.Target = strings.TrimSpace(rec[1])
	}
	return t, checkTerm(t)
}

// checkTerm applies the text rule and the length limit to a term's source
// and target.
func checkTerm(t wire.Term) error {
	for _, f := range [...]struct{ name, text string }{{"source", t.Source}, {"target", t.Target}} {
		if err := textrule.Check(f.text); err != nil {
			return fmt.Errorf("%s term %s: %v", f.name, quoteShort(f.text), err)
		}
		if n := utf8.RuneCountInString(f.text); n > MaxTermLength {
			return fmt.Errorf("%q...: %d characters, at most %d", string([]rune(f.text)[:echoRunes]), n, MaxTermLength)
		}
	}
	return nil
}

// echoRunes bounds what a refusal repeats of a term.
const echoRunes = 40

// quoteShort quotes s as %q does (escaping what is not printable), cut to
// echoRunes characters.
func quoteShort(s string) string {
	if r := []rune(s); len(r) > echoRunes {
		return strconv.Quote(string(r[:echoRunes])) + "…"
	}
	return strconv.Quote(s)
}

// CheckTerms applies the glossary's rules to terms that arrived already
// parsed (an outside publisher's extract_audio payload, whose schema
// bounds their number and length): each term's source and target follow
// the text rule (textrule.Check), and no source term is given twice
// (case-insensitively). The error names the term by its position, from 1.
func CheckTerms(terms []wire.Term) error {
	seen := map[string]int{}
	for i, t := range terms {
		if err := checkTerm(t); err != nil {
			return fmt.Errorf("%w: term %d: %v", ErrInvalid, i+1, err)
		}
		key := strings.ToLower(strings.TrimSpace(t.Source))
		if first, ok := seen[key]; ok {
			return fmt.Errorf("%w: term %d: source term %s is already term %d; give each term once",
				ErrInvalid, i+1, quoteShort(t.Source), first)
		}
		seen[key] = i + 1
	}
	return nil
}
