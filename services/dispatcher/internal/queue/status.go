package queue

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// ProjectStatus is a project's queue at one moment.
type ProjectStatus struct {
	ProjectID uuid.UUID `json:"project_id"`
	// Waiting is the number of waiting entries.
	Waiting int `json:"waiting"`
	// Queued counts the visitors queued for one of the project's agents
	// (in the agents' own queues, not in Entries).
	Queued int `json:"queued"`
	// WaitingByPriority counts waiting entries per priority ("0".."3").
	WaitingByPriority map[string]int `json:"waiting_by_priority"`
	// LongestWaitSeconds is how long the oldest waiting entry has waited.
	LongestWaitSeconds float64 `json:"longest_wait_seconds"`
	// OldestEnteredAt is when the oldest waiting entry arrived.
	OldestEnteredAt *time.Time `json:"oldest_entered_at"`
	// AvailableAgents counts online agents with free capacity.
	AvailableAgents int `json:"available_agents"`
	// FreeCapacity sums their free capacity.
	FreeCapacity int `json:"free_capacity"`
	// AgentCount counts the project's agents.
	AgentCount int `json:"agent_count"`
	// Agents lists the project's agents (at most the limit asked for).
	Agents []Staff `json:"agents"`
	// Entries is the queue in service order, with positions 1, 2, …
	// (at most the limit asked for), each summarised: its visitor_message
	// cut to ListedMessageChars characters (VisitorMessageTruncated says
	// so) and its extra_metadata left out (null); the entry itself has both
	// whole.
	Entries []Entry `json:"entries"`
}

// Status reads a project's queue: counts, the longest wait, up to limit of
// its agents and up to limit waiting entries in service order (summarised,
// see ProjectStatus.Entries), so that the answer stays bounded whatever
// the queue holds. All of it comes from one snapshot (a repeatable-read,
// read-only transaction).
func (q *Queue) Status(ctx context.Context, project uuid.UUID, limit int) (ProjectStatus, error) {
	st := ProjectStatus{ProjectID: project, WaitingByPriority: map[string]int{},
		Agents: []Staff{}, Entries: []Entry{}}
	opts := pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
	err := pgx.BeginTxFunc(ctx, q.pool, opts, func(tx pgx.Tx) error {
		if err := st.readWaiting(ctx, tx); err != nil {
			return err
		}
		if err := st.readAgents(ctx, tx, limit); err != nil {
			return err
		}
		return st.readEntries(ctx, tx, limit)
	})
	if err != nil {
		return ProjectStatus{}, fmt.Errorf("status of project %s: %w", project, err)
	}
	return st, nil
}

// readWaiting counts the waiting entries per priority and dates the
// oldest, and counts the visitors queued for the project's agents.
func (st *ProjectStatus) readWaiting(ctx context.Context, tx pgx.Tx) error {
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM visitor_waiting_queue WHERE project_id = $1 AND status = 'queued'`,
		st.ProjectID).Scan(&st.Queued); err != nil {
		return err
	}
	rows, err := tx.Query(ctx, `SELECT priority, count(*), min(entered_at), now()
		FROM visitor_waiting_queue WHERE project_id = $1 AND status = 'waiting'
		GROUP BY priority`, st.ProjectID)
	if err != nil {
		return err
	}
	var p, n int
	var first, now time.Time
	_, err = pgx.ForEachRow(rows, []any{&p, &n, &first, &now}, func() error {
		st.WaitingByPriority[fmt.Sprint(p)] = n
		st.Waiting += n
		if st.OldestEnteredAt == nil || first.Before(*st.OldestEnteredAt) {
			oldest := first
			st.OldestEnteredAt = &oldest
			st.LongestWaitSeconds = now.Sub(oldest).Seconds()
		}
		return nil
	})
	return err
}

// readAgents counts the project's agents and their free capacity, and
// lists up to limit of them.
func (st *ProjectStatus) readAgents(ctx context.Context, tx pgx.Tx, limit int) error {
	err := tx.QueryRow(ctx, `SELECT count(*),
			count(*) FILTER (WHERE availability = 'online' AND max_concurrent > current_load),
			coalesce(sum(max_concurrent - current_load)
				FILTER (WHERE availability = 'online' AND max_concurrent > current_load), 0)
		FROM staff WHERE project_id = $1`, st.ProjectID).Scan(&st.AgentCount, &st.AvailableAgents, &st.FreeCapacity)
	if err != nil {
		return err
	}
	rows, err := tx.Query(ctx, `SELECT `+staffColumns+` FROM staff WHERE project_id = $1 ORDER BY id LIMIT $2`, st.ProjectID, limit)
	if err != nil {
		return err
	}
	agents, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Staff, error) { return scanStaff(r) })
	if err != nil {
		return err
	}
	st.Agents = append(st.Agents, agents...)
	return nil
}

// ListedMessageChars is how much of an entry's visitor_message a list
// (a project's status) shows.
const ListedMessageChars = 200

// listedColumns is entryColumns as a list reads them: one character of
// the visitor_message more than is shown (to tell a cut one), no metadata.
var listedColumns = strings.NewReplacer(
	"visitor_message", fmt.Sprintf("left(visitor_message, %d)", ListedMessageChars+1),
	"extra_metadata", "NULL::jsonb").Replace(entryColumns)

// readEntries reads up to limit waiting entries in service order,
// summarised.
func (st *ProjectStatus) readEntries(ctx context.Context, tx pgx.Tx, limit int) error {
	rows, err := tx.Query(ctx, `SELECT `+listedColumns+`,
			row_number() OVER (ORDER BY priority DESC, arrival_seq)
		FROM visitor_waiting_queue
		WHERE project_id = $1 AND status = 'waiting'
		ORDER BY priority DESC, arrival_seq
		LIMIT $2`, st.ProjectID, limit)
	if err != nil {
		return err
	}
	entries, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Entry, error) {
		e, err := scanEntry(r, true)
		if m := []rune(e.VisitorMessage); len(m) > ListedMessageChars {
			e.VisitorMessage, e.VisitorMessageTruncated = string(m[:ListedMessageChars]), true
		}
		return e, err
	})
	if err != nil {
		return err
	}
	st.Entries = append(st.Entries, entries...)
	return nil
}

// ProjectQueue is one project in the list of every project's queue.
type ProjectQueue struct {
	ProjectID uuid.UUID `json:"project_id"`
	// Waiting counts the waiting entries; LongestWaitSeconds is how long
	// the oldest has waited, OldestEnteredAt when it arrived.
	Waiting            int        `json:"waiting"`
	LongestWaitSeconds float64    `json:"longest_wait_seconds"`
	OldestEnteredAt    *time.Time `json:"oldest_entered_at"`
	// Agents counts the project's agents, AvailableAgents those online
	// with free capacity, FreeCapacity the sum of it.
	Agents          int `json:"agents"`
	AvailableAgents int `json:"available_agents"`
	FreeCapacity    int `json:"free_capacity"`
}

// Projects lists every project that has waiting entries or agents, the
// longest waits first (then by id), at most limit of them, from one
// snapshot. It only reads.
func (q *Queue) Projects(ctx context.Context, limit int) ([]ProjectQueue, error) {
	rows, err := q.pool.Query(ctx, `WITH w AS (
			SELECT project_id, count(*) AS waiting, min(entered_at) AS oldest
			FROM visitor_waiting_queue WHERE status = 'waiting' GROUP BY project_id),
		s AS (
			SELECT project_id, count(*) AS agents,
				count(*) FILTER (WHERE availability = 'online' AND max_concurrent > current_load) AS available,
				coalesce(sum(max_concurrent - current_load)
					FILTER (WHERE availability = 'online' AND max_concurrent > current_load), 0) AS free
			FROM staff GROUP BY project_id)
		SELECT coalesce(w.project_id, s.project_id), coalesce(w.waiting, 0), w.oldest,
			coalesce(extract(epoch FROM now() - w.oldest), 0)::float8,
			coalesce(s.agents, 0), coalesce(s.available, 0), coalesce(s.free, 0)
		FROM w FULL JOIN s ON s.project_id = w.project_id
		ORDER BY w.oldest NULLS LAST, 1
		LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("list project queues: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ProjectQueue, error) {
		var p ProjectQueue
		err := r.Scan(&p.ProjectID, &p.Waiting, &p.OldestEnteredAt, &p.LongestWaitSeconds,
			&p.Agents, &p.AvailableAgents, &p.FreeCapacity)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("list project queues: %w", err)
	}
	return out, nil
}
