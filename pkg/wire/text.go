package wire

import (
	"encoding/json"
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

// Reason returns s as a failure reason or error text: clean text
// (CleanText) of at most 4096 bytes.
func Reason(s string) string { return truncate(s, maxReasonBytes) }

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
