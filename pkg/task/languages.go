package task

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// A task that dubs into several languages at once is a parent: its row
// records the languages (tasks.targets), it extracts and transcribes the
// audio once, and where its asr step completes it spawns one child task per
// language (Spawn, staged by the asr worker in the same transaction). A
// child (tasks.parent_task_id) starts with the parent's segments and
// glossary and with the parent's extract_audio and asr recorded as its own
// (task_steps rows of worker "parent <id>": nothing runs twice), and then
// translates, synthesizes and muxes like any task. Each child ends by its
// own Succeed, Fail or Cancel; the one that ends last concludes the parent
// in the same statement (conclude_parent, migration 00052): done when every
// child is done, failed naming each failed language otherwise, announced by
// the parent's own event.task.succeeded / event.task.failed (published by
// the outbox sweep).

// concludeSQL is the part of a terminal transition's statement that
// concludes the parent of a child that ended.
const concludeSQL = `, concluded AS (
	SELECT conclude_parent(moved.parent_task_id, @id, moved.to_status) AS id
	  FROM moved
	 WHERE moved.parent_task_id IS NOT NULL AND moved.from_status <> moved.to_status
	   AND moved.to_status IN ('done', 'failed')
)`

// cancelChildrenSQL is the part of Cancel's statement that cancels the
// unfinished children of a parent it cancelled, each announced by its own
// task.cancelled. A child whose row another transaction holds at that
// moment (a step of it committing) is skipped rather than waited for, so
// that Cancel and a child's end, which locks the parent, never deadlock;
// such a child runs on, and its end leaves the cancelled parent alone.
const cancelChildrenSQL = `, children AS (
	UPDATE tasks k SET status = 'failed', error = @error, updated_at = now()
	  FROM (SELECT c.id FROM tasks c
	         WHERE c.parent_task_id = @id AND c.status IN ('queued', 'running', 'compensating')
	           AND EXISTS (SELECT 1 FROM moved WHERE moved.from_status <> moved.to_status)
	         FOR UPDATE OF c SKIP LOCKED) open
	 WHERE k.id = open.id
	RETURNING k.id, k.trace_id
), children_events AS (
	INSERT INTO outbox (message_id, exchange, routing_key, body)
	SELECT e.event_id, @exchange, @routing_key, convert_to(jsonb_strip_nulls(jsonb_build_object(
	           'event_id', e.event_id, 'event', '` + EventCancelled + `', 'task_id', e.id, 'status', 'failed',
	           'error', @error::text, 'occurred_at', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
	           'trace_id', nullif(e.trace_id, '')))::text, 'UTF8')
	  FROM (SELECT gen_random_uuid() AS event_id, children.id, children.trace_id FROM children) e
)`

// InheritedWorker is the worker recorded on the extract_audio and asr rows
// of a child task in task_steps: they ran once, on the parent.
func InheritedWorker(parent uuid.UUID) string { return "parent " + parent.String() }

// Spawn creates the child task of parent that dubs into language, queued
// (task.queued, whose data names the parent and the language), unless it
// exists already (Result.Changed false: a redelivered or replayed fan-in
// spawns nothing). The child's id is wire.ChildTaskID(parent, language); it
// reads its video from its own videos/{child}/source.mp4 (copied there
// from the parent's by the asr worker before Spawn commits) and writes
// outputs/{child}/final.mp4. In the same statement it copies the parent's
// segments (start, end, source text) and glossary, and records the parent's
// succeeded extract_audio and asr as the child's (InheritedWorker), so that
// the child's translate, tts and mux_video run as for any task. A parent
// that does not exist returns ErrNotFound.
func Spawn(parent Ref, language string) Transition {
	id := wire.ChildTaskID(parent.ID, language)
	keys := wire.DefaultKeys(id)
	ref := Ref{ID: id, Step: parent.Step, Trace: parent.Trace}
	data, _ := json.Marshal(map[string]string{"parent_task_id": parent.ID.String(), "target_language": language})
	ev := newEvent(ref, EventQueued, Queued, func(e *wire.Event) { e.Data = data })
	args := map[string]any{"id": id, "parent": parent.ID, "target_language": language,
		"source_video_key": keys.SourceVideo, "output_video_key": keys.OutputVideo,
		"inherited_steps": []string{wire.StepExtractAudio, wire.StepASR}, "worker": InheritedWorker(parent.ID)}
	t := Transition{Name: "spawn", TaskID: id, Event: ev}
	t.SQL, t.Args = positional(spawnSQL, withEvent(args, ref, ev))
	return t
}

// spawnSQL makes a child's row and what it starts with. Its first column
// reads the child's row as it was before the statement (NULL when made
// now); the parent missing makes nothing and reads NULL twice (ErrNotFound).
var spawnSQL = `WITH parent AS (
	SELECT id, source_language, speaker_id, trace_id, project FROM tasks WHERE id = @parent
), created AS (
	INSERT INTO tasks (id, status, source_language, target_language, speaker_id, source_video_key,
	                   output_video_key, trace_id, project, parent_task_id)
	SELECT @id, 'queued', p.source_language, @target_language, p.speaker_id, @source_video_key,
	       @output_video_key, p.trace_id, p.project, p.id
	  FROM parent p
	ON CONFLICT DO NOTHING
	RETURNING id, status, trace_id
), segs AS (
	INSERT INTO segments (task_id, idx, start_ms, end_ms, src_text)
	SELECT c.id, s.idx, s.start_ms, s.end_ms, s.src_text FROM created c JOIN segments s ON s.task_id = @parent
), glossary AS (
	INSERT INTO task_glossaries (task_id, terms)
	SELECT c.id, g.terms FROM created c JOIN task_glossaries g ON g.task_id = @parent
), steps AS (
	INSERT INTO task_steps (task_id, step, part, attempt, status, worker, started_at, finished_at)
	SELECT c.id, s.step, '', 1, 'succeeded', @worker, s.started_at, s.finished_at
	  FROM created c,
	       (SELECT step, min(started_at) AS started_at, max(finished_at) AS finished_at FROM task_steps
	         WHERE task_id = @parent AND step = ANY(@inherited_steps::text[]) AND status = 'succeeded'
	         GROUP BY step) s
)` + createdEventTail

// RowQuerier runs a query: a pool, a connection or a transaction.
type RowQuerier interface {
	Querier
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Child is one child task of a parent: the language it dubs into and how
// far it got.
type Child struct {
	ID             uuid.UUID `json:"task_id"`
	TargetLanguage string    `json:"target_language"`
	Status         string    `json:"status"`
	Error          string    `json:"error,omitempty"`
	OutputVideoKey string    `json:"output_video_key"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
}

// Family is what a task's row says about its place among the tasks of one
// submission.
type Family struct {
	// ParentID is the parent of a child task (uuid.Nil for any other).
	ParentID uuid.UUID `json:"parent_task_id,omitzero"`
	// Targets are a parent's languages (none for any other task).
	Targets []string `json:"target_languages,omitempty"`
	// Children are a parent's child tasks, by language order of Targets;
	// a parent whose asr has not completed has none yet.
	Children []Child `json:"children,omitempty"`
}

// FamilyOf reads task id's parent, languages and children, for dubctl and
// the console (GET /api/tasks/{id} may embed it as "languages"). A task
// that does not exist returns ErrNotFound.
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
