package dub

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Limits of a glossary, as proto/extract_audio.schema.json states them.
const (
	MaxGlossaryTerms = 1000
	MaxTermLength    = 200
)

// ErrInvalidGlossary is returned for a glossary file that cannot be used.
var ErrInvalidGlossary = errors.New("invalid glossary")

// ParseGlossaryCSV reads a glossary as CSV: one term a line, "source,target"
// (an empty or missing target keeps the term as it is). A first line
// "source,target" is a header and skipped; blank lines and lines starting
// with '#' are skipped. A later line for the same source (case-insensitive)
// replaces an earlier one.
func ParseGlossaryCSV(r io.Reader) ([]wire.Term, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.Comment = '#'
	cr.TrimLeadingSpace = true
	var terms []wire.Term
	seen := map[string]int{}
	for line := 1; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidGlossary, err)
		}
		t, err := termOf(rec)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrInvalidGlossary, line, err)
		}
		if t.Source == "" || len(terms) == 0 && strings.EqualFold(t.Source, "source") && strings.EqualFold(t.Target, "target") {
			continue
		}
		key := strings.ToLower(t.Source)
		if i, ok := seen[key]; ok {
			terms[i] = t
			continue
		}
		seen[key] = len(terms)
		terms = append(terms, t)
	}
	if len(terms) > MaxGlossaryTerms {
		return nil, fmt.Errorf("%w: %d terms, at most %d", ErrInvalidGlossary, len(terms), MaxGlossaryTerms)
	}
	return terms, nil
}

// termOf reads one CSV record.
func termOf(rec []string) (wire.Term, error) {
	if len(rec) > 2 {
		return wire.Term{}, fmt.Errorf("%d fields, want source,target", len(rec))
	}
	var t wire.Term
	t.Source = strings.TrimSpace(wire.CleanText(rec[0]))
	if len(rec) == 2 {
		t.Target = strings.TrimSpace(wire.CleanText(rec[1]))
	}
	for _, s := range []string{t.Source, t.Target} {
		if n := utf8.RuneCountInString(s); n > MaxTermLength {
			return wire.Term{}, fmt.Errorf("%q...: %d characters, at most %d", string([]rune(s)[:40]), n, MaxTermLength)
		}
	}
	return t, nil
}

// SaveGlossarySQL stores a task's glossary (arguments: task id, the terms as
// JSON); a later save replaces it.
const SaveGlossarySQL = `INSERT INTO task_glossaries (task_id, terms) VALUES ($1, $2::jsonb)
	ON CONFLICT (task_id) DO UPDATE SET terms = EXCLUDED.terms`

// GlossaryJSON encodes terms for SaveGlossarySQL.
func GlossaryJSON(terms []wire.Term) ([]byte, error) {
	b, err := json.Marshal(terms)
	if err != nil {
		return nil, fmt.Errorf("encode glossary: %w", err)
	}
	return b, nil
}

// Glossary returns the task's glossary, nil when it has none.
func Glossary(ctx context.Context, db Querier, taskID uuid.UUID) ([]wire.Term, error) {
	var raw []byte
	err := db.QueryRow(ctx, `SELECT terms FROM task_glossaries WHERE task_id = $1`, taskID).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read glossary of %s: %w", taskID, err)
	}
	var terms []wire.Term
	if err := json.Unmarshal(raw, &terms); err != nil {
		return nil, fmt.Errorf("read glossary of %s: %w", taskID, err)
	}
	return terms, nil
}
