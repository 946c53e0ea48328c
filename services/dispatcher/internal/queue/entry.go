// Package queue is the waiting-queue dispatcher's domain: visitors waiting
// for a human support agent, the agents
// (staff) with their capacity, and the matching between them. All state
// lives in Postgres; every guarantee holds with any number of dispatcher
// replicas because claims use FOR UPDATE SKIP LOCKED and an agent's capacity
// is reserved by a conditional update in the same statement that assigns the
// entry.
package queue

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Source is where a waiting entry came from.
type Source string

// The queue sources.
const (
	SourceAIRequest Source = "ai_request"
	SourceVisitor   Source = "visitor"
	SourceTransfer  Source = "transfer"
	SourceSystem    Source = "system"
	SourceNoStaff   Source = "no_staff"
)

// Valid reports whether s is one of the queue sources.
func (s Source) Valid() bool {
	switch s {
	case SourceAIRequest, SourceVisitor, SourceTransfer, SourceSystem, SourceNoStaff:
		return true
	}
	return false
}

// Urgency is how urgent a request is.
type Urgency string

// The urgencies, lowest first.
const (
	UrgencyLow    Urgency = "low"
	UrgencyNormal Urgency = "normal"
	UrgencyHigh   Urgency = "high"
	UrgencyUrgent Urgency = "urgent"
)

// Priority maps an urgency to its priority (low 0 … urgent 3); ok is
// false for an unknown urgency.
func (u Urgency) Priority() (p int, ok bool) {
	switch u {
	case UrgencyLow:
		return 0, true
	case UrgencyNormal:
		return 1, true
	case UrgencyHigh:
		return 2, true
	case UrgencyUrgent:
		return 3, true
	}
	return 0, false
}

// Status is an entry's state.
type Status string

// The statuses. A waiting entry is in the queue; a queued one waits in the
// queue of the agent it asked for (seed 002's per-agent queue: the project's
// matching, the scan and the project's positions leave it alone); an
// assigned one holds a unit of its agent's capacity (reserved until
// confirmed, or confirmed) until it is released, or goes back to waiting
// when its reservation expires; released, cancelled and expired are final.
const (
	StatusWaiting Status = "waiting"
	// StatusQueued: in the queue of RequestedStaffID, paired with that
	// agent when one of its units frees up.
	StatusQueued   Status = "queued"
	StatusAssigned Status = "assigned"
	// StatusReleased: the assigned conversation ended and the agent's unit
	// was given back (ReleasedAt says when; AssignedStaffID who served).
	StatusReleased  Status = "released"
	StatusCancelled Status = "cancelled"
	StatusExpired   Status = "expired"
)

// Entry is one visitor waiting for (or already given) a human agent. JSON
// carries the API's field names; Position is the live rank among the
// project's waiting entries (1 = next to be served) — for a queued entry,
// among the items of its agent's queue — and 0 once the entry has left the
// queue.
type Entry struct {
	ID              uuid.UUID  `json:"id"`
	EntryID         uuid.UUID  `json:"entry_id"`
	ProjectID       uuid.UUID  `json:"project_id"`
	VisitorID       uuid.UUID  `json:"visitor_id"`
	SessionID       string     `json:"session_id"`
	AssignedStaffID *uuid.UUID `json:"assigned_staff_id"`
	// RequestedStaffID is the agent the visitor asked for (a transfer
	// naming an agent), whatever happened next.
	RequestedStaffID *uuid.UUID `json:"requested_staff_id"`
	Source           Source     `json:"source"`
	Urgency          Urgency    `json:"urgency"`
	Position         int        `json:"position"`
	Priority         int        `json:"priority"`
	Status           Status     `json:"status"`
	VisitorMessage   string     `json:"visitor_message"`
	// VisitorMessageTruncated says that VisitorMessage holds only the
	// start of the message (in a list: see ProjectStatus.Entries).
	VisitorMessageTruncated bool            `json:"visitor_message_truncated"`
	Reason                  string          `json:"reason"`
	ChannelID               string          `json:"channel_id"`
	ChannelType             *int            `json:"channel_type"`
	ExtraMetadata           json.RawMessage `json:"extra_metadata"`
	RetryCount              int             `json:"retry_count"`
	LastAttemptAt           *time.Time      `json:"last_attempt_at"`
	EnteredAt               time.Time       `json:"entered_at"`
	AssignedAt              *time.Time      `json:"assigned_at"`
	ExitedAt                *time.Time      `json:"exited_at"`
	// ReservedUntil is when an unconfirmed assignment (a reservation of the
	// agent's capacity) expires; nil once confirmed or released.
	ReservedUntil *time.Time `json:"reserved_until"`
	// ConfirmedAt is when the agent confirmed the assignment.
	ConfirmedAt *time.Time `json:"confirmed_at"`
	// ReleasedAt is when the assigned conversation ended (the agent's unit
	// was given back).
	ReleasedAt *time.Time `json:"released_at"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`

	// ArrivalSeq orders entries of equal priority by arrival.
	ArrivalSeq int64 `json:"-"`
}

// entryColumns lists the columns scanEntry reads, in order.
const entryColumns = `id, project_id, visitor_id, session_id, assigned_staff_id, source, urgency,
	arrival_seq, priority, status, visitor_message, reason, channel_id, channel_type,
	extra_metadata, retry_count, last_attempt_at, entered_at, assigned_at, exited_at,
	created_at, updated_at, reserved_until, confirmed_at, released_at, requested_staff_id`

// positionExpr computes the live position of the row aliased e: among its
// project's waiting entries in service order, or, queued, among the items
// of its agent's queue in arrival order.
const positionExpr = `CASE WHEN e.status = 'waiting' THEN 1 + (
	SELECT count(*) FROM visitor_waiting_queue o
	WHERE o.project_id = e.project_id AND o.status = 'waiting'
	  AND (o.priority > e.priority OR (o.priority = e.priority AND o.arrival_seq < e.arrival_seq))
) WHEN e.status = 'queued' THEN (
	SELECT count(*) FROM agent_queue_items o, agent_queue_items i
	WHERE i.entry_id = e.id AND i.status = 'queued'
	  AND o.agent_id = i.agent_id AND o.status = 'queued' AND o.seq <= i.seq
) ELSE 0 END`

// scanEntry reads entryColumns and, when withPosition, a trailing position.
func scanEntry(row pgx.Row, withPosition bool) (Entry, error) {
	var e Entry
	var meta []byte
	dest := []any{&e.ID, &e.ProjectID, &e.VisitorID, &e.SessionID, &e.AssignedStaffID,
		&e.Source, &e.Urgency, &e.ArrivalSeq, &e.Priority, &e.Status, &e.VisitorMessage,
		&e.Reason, &e.ChannelID, &e.ChannelType, &meta, &e.RetryCount, &e.LastAttemptAt,
		&e.EnteredAt, &e.AssignedAt, &e.ExitedAt, &e.CreatedAt, &e.UpdatedAt,
		&e.ReservedUntil, &e.ConfirmedAt, &e.ReleasedAt, &e.RequestedStaffID}
	var pos int64
	if withPosition {
		dest = append(dest, &pos)
	}
	if err := row.Scan(dest...); err != nil {
		return Entry{}, err
	}
	e.EntryID = e.ID
	e.Position = int(pos)
	e.ExtraMetadata = json.RawMessage(meta)
	return e, nil
}

// Sentinel errors callers branch on (the HTTP layer maps them to 404/409).
var (
	// ErrInvalid: the request's fields are invalid.
	ErrInvalid = errors.New("invalid request")
	// ErrNotFound: no such entry or agent.
	ErrNotFound = errors.New("not found")
	// ErrNotWaiting: the entry has left the queue (assigned or expired) and
	// cannot be cancelled.
	ErrNotWaiting = errors.New("entry is not waiting")
	// ErrNothingToRelease: the agent holds no conversation.
	ErrNothingToRelease = errors.New("agent has no conversation to release")
	// ErrNotAssigned: the entry is not assigned (waiting, released,
	// cancelled or expired), so there is nothing to confirm or release.
	ErrNotAssigned = errors.New("entry is not assigned")
	// ErrAgentBusy: an agent that holds open conversations in its project
	// cannot be moved to another one.
	ErrAgentBusy = errors.New("agent holds open conversations in its project")
)

// DuplicateError is returned by Enqueue when the visitor already has an
// active entry in the project.
type DuplicateError struct {
	// Existing is the visitor's active entry.
	Existing Entry
}

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("visitor %s already waiting in project %s as entry %s",
		e.Existing.VisitorID, e.Existing.ProjectID, e.Existing.ID)
}

// ParseSessionID reads a session id as the seed writes them: the AI
// assistant's "channel_123@1" — a channel id (1..255 characters, neither
// "@" nor white space nor a control character) and its numeric type
// (0..999999999), returned — or
// the id of a conversation session, a UUID (no channel). Empty gives
// neither. Anything else ("nope", "c@x", "@1") is refused, naming the value
// (at most 100 characters of it).
func ParseSessionID(sessionID string) (channelID string, channelType *int, err error) {
	if sessionID == "" {
		return "", nil, nil
	}
	if _, err := uuid.Parse(sessionID); err == nil && len(sessionID) == 36 {
		return "", nil, nil
	}
	id, typ, found := strings.Cut(sessionID, "@")
	n, nerr := strconv.Atoi(typ)
	if !found || id == "" || utf8.RuneCountInString(id) > MaxChannelID || strings.ContainsFunc(id, badChannelRune) ||
		nerr != nil || len(typ) > 9 || strings.Trim(typ, "0123456789") != "" {
		shown := sessionID
		if r := []rune(shown); len(r) > 100 {
			shown = string(r[:100]) + "…"
		}
		return "", nil, fmt.Errorf("session_id %q: want channel_id@channel_type (e.g. channel_123@1) or a session UUID", shown)
	}
	return id, &n, nil
}

// badChannelRune reports a character a channel id may not hold.
func badChannelRune(r rune) bool {
	return r == '@' || unicode.IsSpace(r) || unicode.IsControl(r) || r == utf8.RuneError
}
