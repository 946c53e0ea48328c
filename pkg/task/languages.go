package task

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// A task that dubs into several languages at once is a parent: its row
// records the languages (tasks.targets), it extracts and transcribes the
// audio once, and where its asr step completes it spawns one child task per
// language (Spawn, staged by the asr worker in the same transaction). A
// child (tasks.parent_task_id) starts with the parent's segments and
// glossary and with the parent's extract_audio and asr recorded as its own
// (step attempts of worker "parent <id>": nothing runs twice), and then
// translates, synthesizes and muxes like any task. Each child ends by its
// own Succeed, Fail or Cancel; the one that ends last concludes the parent
// in the same statement (conclude_parent, migrations 00052 and 00056): done
// when every child is done, failed when one failed, cancelled when none
// failed but one was cancelled (the error names each such language),
// announced by the parent's own event.task.succeeded / failed / cancelled
// (published by the outbox sweep).

// RowQuerier runs a query: a pool, a connection or a transaction.
type RowQuerier interface {
	Querier
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Child is one child task of a parent: the language it dubs into and how
// far it got. It has no JSON of its own: the read model (pkg/view's Child)
// is what the console and dubctl show.
type Child struct {
	ID             uuid.UUID
	TargetLanguage string
	Status         string
	Error          string
	OutputVideoKey string
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// Family is what a task's row says about its place among the tasks of one
// submission.
type Family struct {
	// ParentID is the parent of a child task (uuid.Nil for any other).
	ParentID uuid.UUID
	// Targets are a parent's languages (none for any other task).
	Targets []string
	// Children are a parent's child tasks, by language order of Targets;
	// a parent whose asr has not completed has none yet.
	Children []Child
}

// FamilyOf reads task id's parent, languages and children, for the read
// model (pkg/view shows it as a task's "languages") and the transitions
// that treat a parent apart. A task that does not exist returns ErrNotFound.
func FamilyOf(ctx context.Context, q RowQuerier, id uuid.UUID) (Family, error) {
	var f Family
	var parent *uuid.UUID
	err := q.QueryRow(ctx, `SELECT parent_task_id, targets FROM tasks WHERE id = $1`, id).Scan(&parent, &f.Targets)
	if errors.Is(err, pgx.ErrNoRows) {
		return f, fmt.Errorf("task %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return f, fmt.Errorf("read task %s: %w", id, err)
	}
	if parent != nil {
		f.ParentID = *parent
	}
	if len(f.Targets) == 0 {
		f.Targets = nil
		return f, nil
	}
	f.Children, err = Children(ctx, q, id)
	return f, err
}

// Children lists the child tasks of parent in the order of its languages
// (none for a task that is no parent, or whose asr has not completed).
func Children(ctx context.Context, q RowQuerier, parent uuid.UUID) ([]Child, error) {
	rows, err := q.Query(ctx, `SELECT c.id, c.target_language, c.status, c.error, c.output_video_key,
		       c.created_at, c.updated_at
		  FROM tasks c LEFT JOIN tasks p ON p.id = c.parent_task_id
		 WHERE c.parent_task_id = $1
		 ORDER BY array_position(p.targets, c.target_language), c.target_language`, parent)
	if err != nil {
		return nil, fmt.Errorf("read children of task %s: %w", parent, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Child, error) {
		var c Child
		return c, row.Scan(&c.ID, &c.TargetLanguage, &c.Status, &c.Error, &c.OutputVideoKey, &c.CreatedAt, &c.UpdatedAt)
	})
	if err != nil {
		return nil, fmt.Errorf("read children of task %s: %w", parent, err)
	}
	return out, nil
}

// Stranded is a child CancelStranded cancelled.
type Stranded struct {
	ID, Parent uuid.UUID
	// EventID is the outbox row of its event.task.cancelled.
	EventID int64
}

// CancelStranded cancels, in tx, up to limit children that have not ended
// of parents an operator cancelled: Cancel of a parent skips a child whose
// row another transaction holds at that moment (cancelChildrenSQL), and
// such a child's steps are refused from then on (task_stopped), so nothing
// else would end it. Each gets its parent's error and its own
// event.task.cancelled. Rows another transaction holds are skipped
// (replicas of the reconciler share the work).
func CancelStranded(ctx context.Context, tx pgx.Tx, limit int) ([]Stranded, error) {
	rows, err := tx.Query(ctx, `SELECT c.id, p.id, p.error FROM tasks c JOIN tasks p ON p.id = c.parent_task_id
		 WHERE c.status IN ('queued', 'running', 'compensating')
		   AND p.status = 'cancelled' AND p.error LIKE 'cancelled:%'
		 ORDER BY c.updated_at LIMIT $1
		 FOR UPDATE OF c SKIP LOCKED`, limit)
	if err != nil {
		return nil, fmt.Errorf("find children of cancelled parents: %w", err)
	}
	type found struct {
		child, parent uuid.UUID
		reason        string
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (found, error) {
		var f found
		return f, row.Scan(&f.child, &f.parent, &f.reason)
	})
	if err != nil {
		return nil, fmt.Errorf("find children of cancelled parents: %w", err)
	}
	out := make([]Stranded, 0, len(list))
	for _, f := range list {
		reason := strings.TrimPrefix(f.reason, "cancelled: ")
		res, err := Apply(ctx, tx, Cancel(Ref{ID: f.child}, reason))
		if err != nil {
			return nil, err
		}
		out = append(out, Stranded{ID: f.child, Parent: f.parent, EventID: res.EventID})
	}
	return out, nil
}
