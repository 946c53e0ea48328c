// Package consoleapi holds the JSON shapes of the console's HTTP API
// (services/console/API.md) that both sides use: the console answers with
// them and dubctl's console mode decodes them, so a field is named in one
// place.
package consoleapi

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// TaskSummary is a task without its steps: an item of GET /api/tasks and
// the head of GET /api/tasks/{id}.
type TaskSummary struct {
	TaskID         uuid.UUID `json:"taskId"`
	Status         string    `json:"status"`
	SourceLanguage string    `json:"sourceLanguage"`
	TargetLanguage string    `json:"targetLanguage"`
	SpeakerID      string    `json:"speakerId"`
	Error          string    `json:"error"`
	CreatedAt      time.Time `json:"createdAt"`
	UpdatedAt      time.Time `json:"updatedAt"`
	// ParentTaskID is the parent of a child task (one language of a
	// submission into several), null for any other task.
	ParentTaskID *uuid.UUID `json:"parentTaskId"`
	// TargetLanguages are a parent's languages, [] for any other task.
	TargetLanguages []string `json:"targetLanguages"`
}

// Languages is the "languages" object of GET /api/tasks/{id}: a parent's
// languages and children, or a child's parent. A task of one language has
// none (null).
type Languages struct {
	ParentTaskID    *uuid.UUID `json:"parentTaskId"`
	TargetLanguages []string   `json:"targetLanguages"`
	Children        []Child    `json:"children"`
}

// Child is one child task of a parent with links to its outputs.
type Child struct {
	TaskID         uuid.UUID  `json:"taskId"`
	TargetLanguage string     `json:"targetLanguage"`
	Status         string     `json:"status"`
	Error          string     `json:"error"`
	OutputVideoKey string     `json:"outputVideoKey"`
	CreatedAt      time.Time  `json:"createdAt"`
	UpdatedAt      time.Time  `json:"updatedAt"`
	Links          ChildLinks `json:"links"`
}

// ChildLinks are presigned GET URLs of a child's outputs (null until done).
type ChildLinks struct {
	Output    *string        `json:"output"`
	Subtitles []SubtitleLink `json:"subtitles"`
}

// SubtitleLink is one subtitle file's presigned URL.
type SubtitleLink struct {
	Language string `json:"language"`
	URL      string `json:"url"`
}

// DeadLetter is a dead letter: an item of GET /api/dead-letters and of a
// task's deadLetters.
type DeadLetter struct {
	ID              int64           `json:"id"`
	MessageID       string          `json:"messageId"`
	TaskID          *uuid.UUID      `json:"taskId"`
	Step            string          `json:"step"`
	Attempt         int             `json:"attempt"`
	ErrorClass      string          `json:"errorClass"`
	FailureReason   string          `json:"failureReason"`
	RoutingKey      string          `json:"routingKey"`
	Source          string          `json:"source"`
	FailedAt        time.Time       `json:"failedAt"`
	RecordedAt      time.Time       `json:"recordedAt"`
	ReplayedAt      *time.Time      `json:"replayedAt"`
	ReplayCount     int             `json:"replayCount"`
	OriginalMessage json.RawMessage `json:"originalMessage,omitempty"`
}
