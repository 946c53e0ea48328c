package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/consoleapi"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// errTaskNotFound is returned for a task id without a row.
var errTaskNotFound = errors.New("no such task")

// Paging bounds of GET /api/tasks.
const (
	defaultPage = 50
	maxPage     = 200
)

// taskSummary is a task without its steps (the API's shape, shared with
// dubctl).
type taskSummary = consoleapi.TaskSummary

const summaryColumns = `id, status, source_language, target_language, speaker_id, error, created_at, updated_at,
	parent_task_id, targets`

func scanSummary(row pgx.Row) (taskSummary, error) {
	var t taskSummary
	err := row.Scan(&t.TaskID, &t.Status, &t.SourceLanguage, &t.TargetLanguage, &t.SpeakerID, &t.Error,
		&t.CreatedAt, &t.UpdatedAt, &t.ParentTaskID, &t.TargetLanguages)
	if t.TargetLanguages == nil {
		t.TargetLanguages = []string{}
	}
	return t, err
}

// taskPage is what GET /api/tasks answers.
type taskPage struct {
	Tasks      []taskSummary `json:"tasks"`
	NextCursor *string       `json:"nextCursor"`
}

// listTasks answers the tasks newest first, one page at a time: the
// cursor is the (created_at, id) of the last task of the previous page,
// so pages stay stable while new tasks arrive.
func (s *server) listTasks(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	status := q.Get("status")
	switch status {
	case "", task.Queued, task.Running, task.Compensating, task.Done, task.Failed, task.Cancelled:
	default:
		s.fail(w, r, badRequest(fmt.Sprintf("status %q: want queued, running, compensating, done, failed or cancelled", status)))
		return
	}
	limit := defaultPage
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxPage {
			s.fail(w, r, badRequest(fmt.Sprintf("limit %q: want 1..%d", v, maxPage)))
			return
		}
		limit = n
	}
	withChildren := false
	switch v := q.Get("includeChildren"); v {
	case "", "false":
	case "true":
		withChildren = true
	default:
		s.fail(w, r, badRequest(fmt.Sprintf("includeChildren %q: want true or false", v)))
		return
	}
	after, afterID, err := parseCursor(q.Get("cursor"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page, err := s.pageOfTasks(r.Context(), status, withChildren, after, afterID, limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

// pageOfTasks reads one page; child tasks (one language of a parent) only
// with withChildren: they are shown under their parent.
func (s *server) pageOfTasks(ctx context.Context, status string, withChildren bool, after *time.Time, afterID uuid.UUID, limit int) (taskPage, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+summaryColumns+` FROM tasks
		WHERE ($1 = '' OR status = $1) AND ($2::timestamptz IS NULL OR (created_at, id) < ($2, $3))
		  AND ($5 OR parent_task_id IS NULL)
		ORDER BY created_at DESC, id DESC LIMIT $4`, status, after, afterID, limit+1, withChildren)
	if err != nil {
		return taskPage{}, fmt.Errorf("list tasks: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (taskSummary, error) { return scanSummary(r) })
	if err != nil {
		return taskPage{}, fmt.Errorf("list tasks: %w", err)
	}
	page := taskPage{Tasks: list}
	if len(list) > limit {
		page.Tasks = list[:limit]
		last := list[limit-1]
		c := cursorOf(last.CreatedAt, last.TaskID)
		page.NextCursor = &c
	}
	if page.Tasks == nil {
		page.Tasks = []taskSummary{}
	}
	return page, nil
}

// cursorOf encodes a page boundary.
func cursorOf(t time.Time, id uuid.UUID) string {
	return base64.RawURLEncoding.EncodeToString([]byte(t.UTC().Format(time.RFC3339Nano) + "," + id.String()))
}

// parseCursor decodes a cursor; "" is the first page.
func parseCursor(c string) (*time.Time, uuid.UUID, error) {
	if c == "" {
		return nil, uuid.Nil, nil
	}
	bad := badRequest("cursor: not a cursor of this API (use nextCursor as given)")
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return nil, uuid.Nil, bad
	}
	ts, idStr, ok := strings.Cut(string(raw), ",")
	t, terr := time.Parse(time.RFC3339Nano, ts)
	id, ierr := uuid.Parse(idStr)
	if !ok || terr != nil || ierr != nil {
		return nil, uuid.Nil, bad
	}
	return &t, id, nil
}

// taskID reads the {id} path value.
func taskID(r *http.Request) (uuid.UUID, error) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		return uuid.Nil, badRequest(fmt.Sprintf("task id %q: want a UUID", r.PathValue("id")))
	}
	return id, nil
}

// taskIDAndBody reads the {id} path value and the JSON body into v.
func taskIDAndBody(r *http.Request, v any) (uuid.UUID, error) {
	id, err := taskID(r)
	if err != nil {
		return uuid.Nil, err
	}
	return id, decodeJSON(r, v)
}

// loadSummary reads one task.
func (s *server) loadSummary(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, id uuid.UUID) (taskSummary, error) {
	t, err := scanSummary(q.QueryRow(ctx, `SELECT `+summaryColumns+` FROM tasks WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return t, fmt.Errorf("task %s: %w", id, errTaskNotFound)
	}
	if err != nil {
		return t, fmt.Errorf("read task %s: %w", id, err)
	}
	return t, nil
}
