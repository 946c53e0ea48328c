// Package shape holds what dubctl's commands and its two modes (the
// database, internal/database; the console's API, internal/api) hand each
// other beyond the shared packages' own types: a checked submission, the
// time range of a list as given, the answer of a re-drive of compensating
// tasks, and the error of an output that is not there. It stands below
// both modes and every command.
package shape

import (
	"errors"

	"github.com/dubflow/dubflow/pkg/admit"
	"github.com/google/uuid"
)

// ErrNoObject is returned by Fetch for an object that does not exist.
var ErrNoObject = errors.New("no such object")

// Requeued is POST /api/compensations/requeue: the tasks re-driven.
type Requeued struct {
	Requeued []RequeuedTask `json:"requeued"`
}

// RequeuedTask is one compensating task re-driven.
type RequeuedTask struct {
	TaskID          uuid.UUID `json:"taskId"`
	Status          string    `json:"status"`
	MissingSegments []int     `json:"missingSegments"`
	Attempt         int       `json:"attempt"`
}

// Range is --since and --until of a list as given: the console reads them
// itself; they were checked already (cli.TimeRange) into the list's filter.
type Range struct {
	Since, Until string
}

// Submission is a checked submit: what either mode sends.
type Submission struct {
	Input string
	// Req is the submission as given (the console judges it again, with
	// its own defaults and the engines it knows).
	Req admit.Request
	// Task is Req as pkg/admit admitted it here (the database mode
	// submits its payload).
	Task admit.Task
	// Probe is the record of the local ffprobe check (admit.ProbeRecord;
	// nil without one), stored with the task in database mode for
	// extract_audio to reuse on the same bytes.
	Probe []byte
	// IdempotencyKey: the same submission with this key within 24 hours
	// answers its first task and creates nothing ("" for none).
	IdempotencyKey string
	// Project owns the task ("": the default project, or through the
	// console the token's own).
	Project string
}
