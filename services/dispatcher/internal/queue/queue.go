package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/dubflow/dubflow/services/dispatcher/internal/agentqueue"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Config holds the queue's processing settings.
type Config struct {
	// MaxRetries is the number of unsuccessful attempts after which a
	// waiting entry expires (QUEUE_PROCESS_MAX_RETRIES).
	MaxRetries int
	// RetryDelay is the least time between two attempts on one entry
	// (QUEUE_PROCESS_RETRY_DELAY_SECONDS).
	RetryDelay time.Duration
	// BatchSize caps the entries one scan attempts (QUEUE_PROCESS_BATCH_SIZE).
	BatchSize int
	// MaxWorkers caps the entries a scan attempts at once
	// (QUEUE_PROCESS_MAX_WORKERS).
	MaxWorkers int
	// ReservationTimeout is how long an assignment reserves the agent's
	// capacity without being confirmed; 0 confirms assignments at once
	// (QUEUE_RESERVATION_TIMEOUT_SECONDS).
	ReservationTimeout time.Duration
	// StuckAfter: a waiting entry not attempted for RetryDelay+StuckAfter,
	// or a reservation overdue by StuckAfter, is stuck
	// (QUEUE_STUCK_ENTRY_SECONDS).
	StuckAfter time.Duration
	// AgentQueueMax is how many items one agent's queue holds (QUEUE_MAX_N):
	// a transfer to an agent whose queue is full is refused.
	AgentQueueMax int
}

// querier is what the pool and a transaction have in common.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Queue is the waiting queue on Postgres. It is safe for concurrent use and
// for any number of replicas sharing one database.
type Queue struct {
	pool *pgxpool.Pool
	cfg  atomic.Pointer[Config]
}

// New returns a Queue on pool.
func New(pool *pgxpool.Pool, cfg Config) *Queue {
	q := &Queue{pool: pool}
	q.Configure(cfg)
	return q
}

// Configure replaces the processing settings (the run-time settings
// changed): scans and assignments that start afterwards use them.
func (q *Queue) Configure(cfg Config) {
	if cfg.MaxRetries < 1 {
		cfg.MaxRetries = 1
	}
	if cfg.BatchSize < 1 {
		cfg.BatchSize = 1
	}
	if cfg.MaxWorkers < 1 {
		cfg.MaxWorkers = 1
	}
	if cfg.AgentQueueMax < 1 {
		cfg.AgentQueueMax = 1
	}
	q.cfg.Store(&cfg)
}

// config is the processing settings in force.
func (q *Queue) config() Config { return *q.cfg.Load() }

// EnqueueRequest is a request for a human agent.
type EnqueueRequest struct {
	// ID is the new entry's id; a zero ID gets a fresh one. Enqueueing the
	// same ID twice returns the first entry (messages are replayed safely).
	ID             uuid.UUID
	ProjectID      uuid.UUID
	VisitorID      uuid.UUID
	SessionID      string
	Source         Source
	Urgency        Urgency
	VisitorMessage string
	Reason         string
	ChannelID      string
	ChannelType    *int
	Metadata       json.RawMessage
}

// Ask is a visitor's request for a human agent as the wire carries it:
// the payload of an AI event (POST /internal/ai/events) and, beside the
// project and the visitor, the waiting.enqueue message.
type Ask struct {
	Reason         string          `json:"reason"`
	Urgency        string          `json:"urgency"`
	SessionID      string          `json:"session_id"`
	Metadata       json.RawMessage `json:"metadata"`
	Source         string          `json:"source"`
	VisitorMessage string          `json:"visitor_message"`
}

// Admit is the EnqueueRequest of the visitor named visitor in the project
// named project asking a, as every door admits it: both ids canonical,
// non-nil UUIDs (ParseID), then Request and Validate. Errors wrap
// ErrInvalid.
func (a Ask) Admit(project, visitor string, source Source) (EnqueueRequest, error) {
	p, err := ParseID("project_id", project)
	if err != nil {
		return EnqueueRequest{}, err
	}
	v, err := ParseID("visitor_id", visitor)
	if err != nil {
		return EnqueueRequest{}, err
	}
	r, err := a.Request(p, v, source)
	if err != nil {
		return EnqueueRequest{}, err
	}
	return r, r.Validate()
}

// Request is the EnqueueRequest of visitor in project asking a: an empty
// source is source, an empty urgency normal and an empty visitor message
// the reason; the session id names the channel (ParseSessionID, whose
// error it returns).
func (a Ask) Request(project, visitor uuid.UUID, source Source) (EnqueueRequest, error) {
	channelID, channelType, err := ParseSessionID(a.SessionID)
	if err != nil {
		return EnqueueRequest{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return EnqueueRequest{
		ProjectID:      project,
		VisitorID:      visitor,
		SessionID:      a.SessionID,
		Source:         Source(orDefault(a.Source, string(source))),
		Urgency:        Urgency(orDefault(a.Urgency, string(UrgencyNormal))),
		VisitorMessage: orDefault(a.VisitorMessage, a.Reason),
		Reason:         a.Reason,
		ChannelID:      channelID,
		ChannelType:    channelType,
		Metadata:       a.Metadata,
	}, nil
}

// orDefault is v, or def when v is empty.
func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// Validate checks the request's fields: non-nil ids, a known source and
// urgency, the texts within their limits in characters and free of control
// characters (the reason and the channel a single line, the visitor's
// message free text), the metadata as MetadataJSON wants it. Errors wrap
// ErrInvalid.
func (r EnqueueRequest) Validate() error {
	if r.ProjectID == uuid.Nil {
		return invalidf("project_id is required")
	}
	if r.VisitorID == uuid.Nil {
		return invalidf("visitor_id is required")
	}
	if !r.Source.Valid() {
		return invalidf("unknown source %s (want ai_request, visitor, transfer, system or no_staff)", shown(string(r.Source)))
	}
	if _, ok := r.Urgency.Priority(); !ok {
		return invalidf("unknown urgency %s (want low, normal, high or urgent)", shown(string(r.Urgency)))
	}
	for _, c := range []struct {
		field, value string
		max          int
		check        func(field, s string, max int) error
	}{
		{"reason", r.Reason, MaxReason, CheckLine},
		{"visitor_message", r.VisitorMessage, MaxVisitorMessage, CheckText},
		{"session_id", r.SessionID, MaxSessionID, CheckLine},
		{"channel_id", r.ChannelID, MaxChannelID, CheckLine},
	} {
		if err := c.check(c.field, c.value, c.max); err != nil {
			return err
		}
	}
	_, err := MetadataJSON(r.Metadata)
	return err
}

// Enqueue adds a waiting entry. A visitor with an active entry in the
// project gets a *DuplicateError naming it (the unique partial index on
// active entries decides, not a prior check). Enqueue does not match;
// callers follow it with Process.
func (q *Queue) Enqueue(ctx context.Context, r EnqueueRequest) (Entry, error) {
	if err := r.Validate(); err != nil {
		return Entry{}, err
	}
	if r.ID == uuid.Nil {
		r.ID = uuid.New()
	}
	if err := insertEntry(ctx, q.pool, r); err != nil {
		return Entry{}, q.duplicate(ctx, r, err)
	}
	return q.Entry(ctx, r.ID)
}

// execer is what the pool and a transaction have in common for writes.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// insertEntry inserts the validated request r as a waiting entry through
// db (the pool or a transaction); inserting an id that exists does nothing.
func insertEntry(ctx context.Context, db execer, r EnqueueRequest) error {
	priority, _ := r.Urgency.Priority()
	meta, err := MetadataJSON(r.Metadata)
	if err != nil {
		return err
	}
	const insert = `INSERT INTO visitor_waiting_queue
		(id, project_id, visitor_id, session_id, source, urgency, priority,
		 visitor_message, reason, channel_id, channel_type, extra_metadata)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
		ON CONFLICT (id) DO NOTHING`
	_, err = db.Exec(ctx, insert, r.ID, r.ProjectID, r.VisitorID, r.SessionID, r.Source,
		r.Urgency, priority, r.VisitorMessage, r.Reason, r.ChannelID, r.ChannelType, meta)
	return err
}

// duplicate turns the error of an insert of r into a *DuplicateError when
// the visitor was already active in the project, and wraps it otherwise.
func (q *Queue) duplicate(ctx context.Context, r EnqueueRequest, err error) error {
	var pg *pgconn.PgError
	if errors.As(err, &pg) && pg.Code == "23505" && pg.ConstraintName == "visitor_waiting_queue_active_visitor" {
		existing, ferr := q.activeEntry(ctx, r.ProjectID, r.VisitorID)
		if ferr != nil {
			return fmt.Errorf("enqueue visitor %s: %w", r.VisitorID, ferr)
		}
		return &DuplicateError{Existing: existing}
	}
	return fmt.Errorf("enqueue visitor %s: %w", r.VisitorID, err)
}

// activeEntry returns the visitor's active entry in the project: waiting
// in its queue or queued for one of its agents.
func (q *Queue) activeEntry(ctx context.Context, project, visitor uuid.UUID) (Entry, error) {
	row := q.pool.QueryRow(ctx, `SELECT `+entryColumns+`, `+positionExpr+`
		FROM visitor_waiting_queue e
		WHERE project_id = $1 AND visitor_id = $2 AND status IN ('waiting', 'queued')`, project, visitor)
	e, err := scanEntry(row, true)
	if errors.Is(err, pgx.ErrNoRows) {
		// The active entry left the queue between the insert and this read.
		return Entry{}, fmt.Errorf("find active entry: %w", ErrNotFound)
	}
	if err != nil {
		return Entry{}, fmt.Errorf("find active entry: %w", err)
	}
	return e, nil
}

// Entry returns the entry with its live position.
func (q *Queue) Entry(ctx context.Context, id uuid.UUID) (Entry, error) {
	return entry(ctx, q.pool, id)
}

// entry reads an entry with its live position through db (the pool or a
// transaction).
func entry(ctx context.Context, db querier, id uuid.UUID) (Entry, error) {
	row := db.QueryRow(ctx, `SELECT `+entryColumns+`, `+positionExpr+`
		FROM visitor_waiting_queue e WHERE id = $1`, id)
	e, err := scanEntry(row, true)
	if errors.Is(err, pgx.ErrNoRows) {
		return Entry{}, fmt.Errorf("entry %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Entry{}, fmt.Errorf("read entry %s: %w", id, err)
	}
	return e, nil
}

// Cancel takes a waiting entry out of the queue, or a queued one out of
// its agent's queue (CancelBy).
func (q *Queue) Cancel(ctx context.Context, id uuid.UUID) (Entry, error) {
	return q.CancelBy(ctx, id, "DELETE /queue/entries/{id}")
}

// CancelBy takes a waiting entry out of the queue, or a queued one out of
// its agent's queue — its item cancelled (recording by) and the agent's
// queue_size lowered in the same transaction. Cancelling a cancelled entry
// returns it unchanged; an assigned, released or expired entry gives
// ErrNotWaiting.
func (q *Queue) CancelBy(ctx context.Context, id uuid.UUID, by string) (Entry, error) {
	changed := false
	err := pgx.BeginFunc(ctx, q.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE visitor_waiting_queue
			SET status = 'cancelled', exited_at = now(), updated_at = now()
			WHERE id = $1 AND status IN ('waiting', 'queued')`, id)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		changed = true
		return agentqueue.CancelEntryIn(ctx, tx, id, by)
	})
	if err != nil {
		return Entry{}, fmt.Errorf("cancel entry %s: %w", id, err)
	}
	e, err := q.Entry(ctx, id)
	if err != nil {
		return Entry{}, err
	}
	if !changed && e.Status != StatusCancelled {
		return e, fmt.Errorf("cancel entry %s (%s): %w", id, e.Status, ErrNotWaiting)
	}
	return e, nil
}

// Outcome is the result of one Process call.
type Outcome struct {
	// Entry is the entry afterwards.
	Entry Entry
	// Assigned lists the assignments the call made in the entry's project
	// (the entry itself among them if it was served).
	Assigned []Entry
	// Expired is set when this call's attempt expired the entry.
	Expired bool
}

// Process is one attempt on an entry. In
// one transaction it serves the entry's project in order (the head of the
// queue first) while agents are free, and if the entry is still waiting it
// records the attempt; the attempt that reaches MaxRetries expires the
// entry. The claims and the attempt commit together or not at all, so a
// failure in between leaves neither an assignment nor a counted attempt.
// When onlyDue is set the attempt is recorded only if RetryDelay has passed
// since the last one (the periodic scan); otherwise it is always recorded
// (the trigger on enqueue). Afterwards, when the entry is still waiting, a
// Match picks up pairs that concurrent matchers held during the transaction.
func (q *Queue) Process(ctx context.Context, id uuid.UUID, onlyDue bool) (Outcome, error) {
	var out Outcome
	err := pgx.BeginFunc(ctx, q.pool, func(tx pgx.Tx) error {
		var err error
		out, err = q.ProcessIn(ctx, tx, id, onlyDue)
		return err
	})
	if err != nil {
		return Outcome{}, err
	}
	if out.Entry.Status != StatusWaiting {
		return out, nil
	}
	more, err := q.Match(ctx, out.Entry.ProjectID)
	out.Assigned = append(out.Assigned, more...)
	if err != nil || len(more) == 0 {
		return out, err
	}
	out.Entry, err = q.Entry(ctx, id)
	return out, err
}

// ProcessIn is Process's transaction, run inside the caller's: the step
// runtime's success transaction, so that an attempt made for a message
// commits with the message's step and a message run twice (its first
// success commit failed) attempts once. It does not run the follow-up
// Match; the scan's matching catches what concurrent matchers held.
func (q *Queue) ProcessIn(ctx context.Context, tx pgx.Tx, id uuid.UUID, onlyDue bool) (Outcome, error) {
	out, err := q.processIn(ctx, tx, id, onlyDue)
	if err != nil {
		return Outcome{}, fmt.Errorf("process entry %s: %w", id, err)
	}
	return out, nil
}

func (q *Queue) processIn(ctx context.Context, tx pgx.Tx, id uuid.UUID, onlyDue bool) (Outcome, error) {
	var out Outcome
	// The entry's own row lock comes first, before any claim: it is the
	// only lock this transaction waits for (the claims skip locked rows),
	// so two attempts never wait on each other's claims.
	if _, err := tx.Exec(ctx, `SELECT 1 FROM visitor_waiting_queue WHERE id = $1 FOR UPDATE`, id); err != nil {
		return out, err
	}
	e, err := entry(ctx, tx, id)
	if err != nil || e.Status != StatusWaiting {
		out.Entry = e
		return out, err
	}
	for {
		a, ok, err := q.assignIn(ctx, tx, e.ProjectID)
		if err != nil {
			return out, err
		}
		if !ok {
			break
		}
		out.Assigned = append(out.Assigned, a)
		if a.ID == id {
			out.Entry = a
			return out, nil
		}
	}
	if out.Expired, err = recordAttempt(ctx, tx, id, q.config().MaxRetries, onlyDue, q.config().RetryDelay); err != nil {
		return out, err
	}
	out.Entry, err = entry(ctx, tx, id)
	return out, err
}

// recordAttempt counts an unsuccessful attempt inside tx and expires the
// entry when it was the last one, adding event.waiting.expired in the same
// transaction. It reports whether it expired the entry. Nothing happens when
// the entry has left the queue or, with onlyDue, is not due yet.
func recordAttempt(ctx context.Context, tx pgx.Tx, id uuid.UUID, maxRetries int, onlyDue bool, delay time.Duration) (bool, error) {
	row := tx.QueryRow(ctx, `UPDATE visitor_waiting_queue e
		SET retry_count = retry_count + 1, last_attempt_at = now(), updated_at = now(),
		    status = CASE WHEN retry_count + 1 >= $2 THEN 'expired' ELSE status END,
		    exited_at = CASE WHEN retry_count + 1 >= $2 THEN now() ELSE exited_at END
		WHERE id = $1 AND status = 'waiting'
		  AND (NOT $3 OR last_attempt_at IS NULL OR last_attempt_at <= now() - make_interval(secs => $4))
		RETURNING `+entryColumns, id, maxRetries, onlyDue, delay.Seconds())
	e, err := scanEntry(row, false)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil // assigned, cancelled or attempted by another replica meanwhile
	}
	if err != nil {
		return false, fmt.Errorf("record attempt on entry %s: %w", id, err)
	}
	if e.Status != StatusExpired {
		return false, nil
	}
	return true, addEvent(ctx, tx, EventExpired, e)
}
