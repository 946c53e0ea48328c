package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"
	"golang.org/x/term"
)

// WriteJSON prints v as indented JSON.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	return nil
}

// IsTerminal reports whether w (or the writer under its escaper) is a
// terminal (a progress bar makes sense).
func IsTerminal(w io.Writer) bool {
	f, ok := RawWriter(w).(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Shorten cuts s to n runes for a table cell.
func Shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// OrDash shows an empty value (the part of a step that is not fanned out)
// as "-".
func OrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// LanguageOutput is where wait saves one language's video: the --output
// file with the language before its extension, else <parent>.<language>.mp4.
func LanguageOutput(output string, parent uuid.UUID, language string) string {
	if output == "" {
		return parent.String() + "." + language + ".mp4"
	}
	ext := filepath.Ext(output)
	return strings.TrimSuffix(output, ext) + "." + language + ext
}

// Clock formats milliseconds as m:ss.mmm.
func Clock(ms int) string {
	return fmt.Sprintf("%d:%02d.%03d", ms/60000, ms/1000%60, ms%1000)
}

// OneLineText keeps a text on one table line.
func OneLineText(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// Span is the duration between two optional times, "-" when unknown.
func Span(from, to *time.Time) string {
	if from == nil || to == nil {
		return "-"
	}
	return to.Sub(*from).Round(time.Millisecond).String()
}
