package wire

import (
	"strings"
	"unicode/utf8"
)

// CleanText returns s as text that every store and every consumer accepts:
// valid UTF-8 without NUL bytes. Invalid byte sequences and NULs become
// U+FFFD. It is the one boundary every text dubflow stores in Postgres or
// publishes passes (error texts, failure reasons, the text fields of events,
// dead letters and compensation messages): Postgres refuses both in a text
// value (SQLSTATE 22021), and an error text taken from an engine's HTTP
// body, ffmpeg's stderr or a file name may hold either.
func CleanText(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// Reason returns s as a failure reason or error text: clean text
// (CleanText) of at most 4096 bytes.
func Reason(s string) string { return truncate(s, maxReasonBytes) }
