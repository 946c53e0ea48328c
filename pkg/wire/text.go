package wire

import (
	"encoding/json"
	"path"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
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

// Reason returns s as a failure reason or error text: an error text
// (ErrorText) of at most 4096 bytes.
func Reason(s string) string { return truncate(ErrorText(s), maxReasonBytes) }

// ErrorText returns s as an error text fit to store and to show: clean
// text (CleanText) in which a path into a worker's scratch space — a
// folder or file named dubflow-… such as
// /tmp/dubflow-extract_audio-123/source.mp4 — is cut to its last element
// (source.mp4), and "Go struct field T.f" of a JSON decoding error reads
// "field f". The operator reads what failed, not where a worker kept its
// files or how the code names its types; the worker's log keeps the whole
// error.
func ErrorText(s string) string {
	s = CleanText(s)
	if strings.Contains(s, "/dubflow-") {
		s = scratchPath.ReplaceAllStringFunc(s, func(m string) string {
			sub := scratchPath.FindStringSubmatch(m)
			return sub[1] + path.Base(sub[2])
		})
	}
	if strings.Contains(s, "Go struct field ") {
		s = goStructField.ReplaceAllString(s, "field ")
	}
	return s
}

// scratchPath matches an absolute path with an element named dubflow-…,
// after the start, a space, a quote, a parenthesis, "=" or ":" (file:…),
// never inside a URL (http://host/dubflow-…: the path would start with
// "//").
var scratchPath = regexp.MustCompile(`(^|[\s"'(=:])((?:/[^\s/"'()<>,;]+)*/dubflow-[^\s/"'()<>,;]*(?:/[^\s/"'()<>,;]+)*)`)

// goStructField matches encoding/json's "Go struct field T.f." prefix of
// a field's name.
var goStructField = regexp.MustCompile(`Go struct field (?:[A-Za-z0-9_]+\.)+`)

// MessageID returns the id a message body carries — an event's event_id, an
// envelope's message_id — for the AMQP message_id and the outbox, so that a
// message has one id however often it is published. ok is false when the
// body carries none.
func MessageID(body []byte) (id uuid.UUID, ok bool) {
	var ids struct {
		EventID   uuid.UUID `json:"event_id"`
		MessageID uuid.UUID `json:"message_id"`
	}
	if json.Unmarshal(body, &ids) != nil {
		return uuid.Nil, false
	}
	if ids.EventID != uuid.Nil {
		return ids.EventID, true
	}
	return ids.MessageID, ids.MessageID != uuid.Nil
}
