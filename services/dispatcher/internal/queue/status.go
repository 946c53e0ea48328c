package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// ProjectStatus is a project's queue at one moment.
type ProjectStatus struct {
	ProjectID uuid.UUID `json:"project_id"`
	// Waiting is the number of waiting entries.
	Waiting int `json:"waiting"`
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
	// Agents lists the project's agents.
	Agents []Staff `json:"agents"`
	// Entries is the queue in service order, with positions 1, 2, …
	// (at most the limit asked for).
	Entries []Entry `json:"entries"`
}

// Status reads a project's queue: counts, the longest wait, its agents and
// up to limit waiting entries in service order. All of it comes from one
// snapshot (a repeatable-read, read-only transaction).
func (q *Queue) Status(ctx context.Context, project uuid.UUID, limit int) (ProjectStatus, error) {
	st := ProjectStatus{ProjectID: project, WaitingByPriority: map[string]int{},
		Agents: []Staff{}, Entries: []Entry{}}
	opts := pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
	err := pgx.BeginTxFunc(ctx, q.pool, opts, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT priority, count(*), min(entered_at)
			FROM visitor_waiting_queue WHERE project_id = $1 AND status = 'waiting'
			GROUP BY priority`, project)
		if err != nil {
			return err
		}
		var oldest time.Time
		for rows.Next() {
			var p, n int
			var first time.Time
			if err := rows.Scan(&p, &n, &first); err != nil {
				rows.Close()
				return err
			}
			st.WaitingByPriority[fmt.Sprint(p)] = n
			st.Waiting += n
			if oldest.IsZero() || first.Before(oldest) {
				oldest = first
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		var now time.Time
		if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
			return err
		}
		if !oldest.IsZero() {
			st.OldestEnteredAt = &oldest
			st.LongestWaitSeconds = now.Sub(oldest).Seconds()
		}

		rows, err = tx.Query(ctx, `SELECT `+staffColumns+` FROM staff WHERE project_id = $1 ORDER BY id`, project)
		if err != nil {
			return err
		}
		for rows.Next() {
			s, err := scanStaff(rows)
			if err != nil {
				rows.Close()
				return err
			}
			if s.FreeCapacity > 0 {
				st.AvailableAgents++
				st.FreeCapacity += s.FreeCapacity
			}
			st.Agents = append(st.Agents, s)
		}
		if err := rows.Err(); err != nil {
			return err
		}

		rows, err = tx.Query(ctx, `SELECT `+entryColumns+`,
				row_number() OVER (ORDER BY priority DESC, arrival_seq)
			FROM visitor_waiting_queue
			WHERE project_id = $1 AND status = 'waiting'
			ORDER BY priority DESC, arrival_seq
			LIMIT $2`, project, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			e, err := scanEntry(rows, true)
			if err != nil {
				return err
			}
			st.Entries = append(st.Entries, e)
		}
		return rows.Err()
	})
	if err != nil {
		return ProjectStatus{}, fmt.Errorf("status of project %s: %w", project, err)
	}
	return st, nil
}
