package wire

import (
	"encoding/json"
	"strings"

	"github.com/google/uuid"
)

// Head is what a message that is not a valid envelope still says about
// itself — its task, step, attempt and trace — each kept only when the
// contract accepts it, so that a dead letter can name the task and fail it.
type Head struct {
	// TaskID is uuid.Nil when task_id is missing or not a UUID.
	TaskID uuid.UUID
	// Step is "" unless it is a known step (RoutingKey names it).
	Step string
	// Attempt is 0 unless it is 1 to 1000.
	Attempt int
	// TraceID is "" unless it is 1 to 128 printable ASCII characters.
	TraceID string
}

// PeekHead reads the head of body: the envelope's task_id, step, attempt
// and trace_id, without validating the rest. ok is false when body is not
// a JSON object or larger than MaxMessageBytes. The step runtime reads a
// message it refuses with it, the outbox relay a row it moves to the dead
// letters, and the dead-letter recorder a failed message that is no valid
// envelope: one reading, the same everywhere.
func PeekHead(body []byte) (h Head, ok bool) {
	if len(body) > MaxMessageBytes {
		return Head{}, false
	}
	var raw struct {
		TaskID  string `json:"task_id"`
		Step    string `json:"step"`
		Attempt int    `json:"attempt"`
		TraceID string `json:"trace_id"`
	}
	if json.Unmarshal(body, &raw) != nil {
		return Head{}, false
	}
	if id, err := uuid.Parse(raw.TaskID); err == nil {
		h.TaskID = id
	}
	if RoutingKey(raw.Step) != "" {
		h.Step = raw.Step
	}
	if raw.Attempt > 0 && raw.Attempt <= 1000 {
		h.Attempt = raw.Attempt
	}
	if n := len(raw.TraceID); n > 0 && n <= 128 && strings.IndexFunc(raw.TraceID, func(r rune) bool { return r <= ' ' || r > '~' }) < 0 {
		h.TraceID = raw.TraceID
	}
	return h, true
}
