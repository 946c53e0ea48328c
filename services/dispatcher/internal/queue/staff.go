package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Availability is an agent's presence.
type Availability string

// Agent presences; only online agents are assigned visitors.
const (
	Online  Availability = "online"
	Away    Availability = "away"
	Offline Availability = "offline"
)

// Valid reports whether a is a known presence.
func (a Availability) Valid() bool {
	return a == Online || a == Away || a == Offline
}

// Staff is a human support agent and its current load.
type Staff struct {
	ID            uuid.UUID    `json:"id"`
	StaffID       uuid.UUID    `json:"staff_id"`
	ProjectID     uuid.UUID    `json:"project_id"`
	Availability  Availability `json:"availability"`
	MaxConcurrent int          `json:"max_concurrent"`
	CurrentLoad   int          `json:"current_load"`
	FreeCapacity  int          `json:"free_capacity"`
	IdleSince     time.Time    `json:"idle_since"`
	CreatedAt     time.Time    `json:"created_at"`
	UpdatedAt     time.Time    `json:"updated_at"`
}

const staffColumns = `id, project_id, availability, max_concurrent, current_load, idle_since, created_at, updated_at`

func scanStaff(row pgx.Row) (Staff, error) {
	var s Staff
	if err := row.Scan(&s.ID, &s.ProjectID, &s.Availability, &s.MaxConcurrent, &s.CurrentLoad,
		&s.IdleSince, &s.CreatedAt, &s.UpdatedAt); err != nil {
		return Staff{}, err
	}
	s.StaffID = s.ID
	if s.Availability == Online && s.MaxConcurrent > s.CurrentLoad {
		s.FreeCapacity = s.MaxConcurrent - s.CurrentLoad
	}
	return s, nil
}

// StaffUpdate sets an agent's project, presence and capacity.
type StaffUpdate struct {
	ID            uuid.UUID
	ProjectID     uuid.UUID
	Availability  Availability
	MaxConcurrent int
}

// Validate checks the update's fields.
func (u StaffUpdate) Validate() error {
	if u.ID == uuid.Nil {
		return errors.New("staff id is required")
	}
	if u.ProjectID == uuid.Nil {
		return errors.New("project_id is required")
	}
	if !u.Availability.Valid() {
		return fmt.Errorf("availability must be online, away or offline, not %q", u.Availability)
	}
	if u.MaxConcurrent < 0 || u.MaxConcurrent > 1000 {
		return fmt.Errorf("max_concurrent must be between 0 and 1000, not %d", u.MaxConcurrent)
	}
	return nil
}

// PutStaff creates or updates an agent. Lowering max_concurrent below the
// current load takes no conversation away; the agent just gets no new one
// until its load is under the new maximum. An agent is moved to another
// project only while it holds no open conversation (ErrAgentBusy
// otherwise): its load counts assignments of its project, so a move would
// carry them into a project they are not part of, where their releases
// would free capacity the old project's matching never sees. The check and
// the move are one statement on the agent's locked row, so no assignment
// slips in between. Callers follow it with Match on the agent's project,
// since an agent coming online or gaining capacity frees capacity.
func (q *Queue) PutStaff(ctx context.Context, u StaffUpdate) (Staff, error) {
	if err := u.Validate(); err != nil {
		return Staff{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	for try := 0; ; try++ {
		s, err := scanStaff(q.pool.QueryRow(ctx, putStaffSQL, u.ID, u.ProjectID, u.Availability, u.MaxConcurrent))
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return Staff{}, fmt.Errorf("put staff %s: %w", u.ID, err)
		}
		// The agent is in another project with open conversations, or
		// was a moment ago: read it to say so, or try again (bounded) if
		// its last conversation ended meanwhile.
		now, err := q.Staff(ctx, u.ID)
		if err != nil {
			return Staff{}, fmt.Errorf("put staff %s: %w", u.ID, err)
		}
		if now.CurrentLoad > 0 || try == 2 {
			return Staff{}, fmt.Errorf("move staff %s to project %s: it holds %d open conversation(s) in project %s; "+
				"release them first: %w", u.ID, u.ProjectID, now.CurrentLoad, now.ProjectID, ErrAgentBusy)
		}
	}
}

// putStaffSQL creates or updates an agent (arguments: id, project,
// availability, max_concurrent), unless that moves an agent holding open
// conversations to another project: then it returns no row.
const putStaffSQL = `INSERT INTO staff (id, project_id, availability, max_concurrent)
	VALUES ($1, $2, $3, $4)
	ON CONFLICT (id) DO UPDATE SET
		project_id = EXCLUDED.project_id,
		availability = EXCLUDED.availability,
		max_concurrent = EXCLUDED.max_concurrent,
		idle_since = CASE WHEN staff.availability <> 'online' AND EXCLUDED.availability = 'online'
		                  THEN now() ELSE staff.idle_since END,
		updated_at = now()
	WHERE staff.project_id = EXCLUDED.project_id OR staff.current_load = 0
	RETURNING ` + staffColumns

// Staff returns an agent.
func (q *Queue) Staff(ctx context.Context, id uuid.UUID) (Staff, error) {
	s, err := scanStaff(q.pool.QueryRow(ctx, `SELECT `+staffColumns+` FROM staff WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Staff{}, fmt.Errorf("staff %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Staff{}, fmt.Errorf("read staff %s: %w", id, err)
	}
	return s, nil
}

// releaseOldestSQL ends the agent's oldest open assignment and gives its
// unit back in one statement (argument: staff id), keeping current_load
// equal to the agent's open assignments. Assignments another transaction
// is releasing are skipped, so concurrent releases end different ones.
const releaseOldestSQL = `WITH one AS (
	SELECT id FROM visitor_waiting_queue
	WHERE assigned_staff_id = $1 AND status = 'assigned' AND released_at IS NULL
	ORDER BY assigned_at, id
	LIMIT 1
	FOR UPDATE SKIP LOCKED
), released AS (
	UPDATE visitor_waiting_queue e
	SET status = 'released', released_at = now(), reserved_until = NULL, updated_at = now()
	FROM one WHERE e.id = one.id AND e.status = 'assigned'
	RETURNING e.assigned_staff_id
)
UPDATE staff s SET current_load = s.current_load - 1, updated_at = now()
FROM released WHERE s.id = released.assigned_staff_id AND s.current_load > 0
RETURNING ` + staffColumnsQualified

// staffColumnsQualified is staffColumns qualified by the alias s.
const staffColumnsQualified = `s.id, s.project_id, s.availability, s.max_concurrent, s.current_load,
	s.idle_since, s.created_at, s.updated_at`

// Release is ReleaseStaff without the pairings it made.
func (q *Queue) Release(ctx context.Context, id uuid.UUID) (Staff, error) {
	st, _, err := q.ReleaseStaff(ctx, id)
	return st, err
}

// ReleaseStaff ends one of the agent's conversations without naming it
// (its oldest open assignment), frees its unit and, in the same
// transaction, hands it to the oldest visitor queued for the agent (PairIn;
// the pairings are returned). An agent with none gives
// ErrNothingToRelease. Callers follow it with Match on the agent's
// project. ReleaseEntry, which names the entry, is idempotent; this is not.
func (q *Queue) ReleaseStaff(ctx context.Context, id uuid.UUID) (Staff, []Entry, error) {
	var paired []Entry
	err := pgx.BeginFunc(ctx, q.pool, func(tx pgx.Tx) error {
		var err error
		paired, err = q.ReleaseIn(ctx, tx, id)
		return err
	})
	if errors.Is(err, ErrNothingToRelease) {
		if _, err := q.Staff(ctx, id); err != nil {
			return Staff{}, nil, err
		}
	}
	if err != nil {
		return Staff{}, nil, err
	}
	st, err := q.Staff(ctx, id)
	return st, paired, err
}

// ReleaseIn is ReleaseStaff inside the caller's transaction (the step
// runtime's success transaction, so a redelivered message never releases
// twice): the release, and the pairings of the freed unit, commit with it.
func (q *Queue) ReleaseIn(ctx context.Context, tx pgx.Tx, id uuid.UUID) ([]Entry, error) {
	_, err := scanStaff(tx.QueryRow(ctx, releaseOldestSQL, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("release staff %s: %w", id, ErrNothingToRelease)
	}
	if err != nil {
		return nil, fmt.Errorf("release staff %s: %w", id, err)
	}
	paired, err := q.PairIn(ctx, tx, id)
	if err != nil {
		return nil, fmt.Errorf("release staff %s: %w", id, err)
	}
	return paired, nil
}
