package view

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/internal/attempt"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// MaxPage is the most tasks one page of List holds.
const MaxPage = 200

// ErrBadFilter is returned for a filter List refuses.
var ErrBadFilter = errors.New("bad filter")

// Filter selects tasks for List.
type Filter struct {
	// Status keeps only tasks in this status ("" for any).
	Status string
	// WithChildren lists child tasks too (else they are shown under their
	// parent only).
	WithChildren bool
	// Cursor continues after the last task of the page that gave it
	// (Page.NextCursor); "" starts with the newest.
	Cursor string
	// Limit is the page size, 1..MaxPage.
	Limit int
	// Q keeps tasks whose id starts with it or whose uploaded file's name
	// (FileName) or source object key contains it, without regard to case.
	Q string
	// Language keeps tasks from or to this language (a parent's targets
	// included).
	Language string
	// Since and Until keep tasks created in [Since, Until) (nil: open).
	Since, Until *time.Time
	// Project keeps the tasks of this project ("" for every project).
	Project string
	// Error keeps tasks whose error, or an error of one of their step
	// attempts, contains it, without regard to case.
	Error string
}

// Page is one page of tasks, newest first.
type Page struct {
	Tasks      []Summary `json:"tasks"`
	NextCursor *string   `json:"nextCursor"`
}

// Check refuses a status that is none and a limit out of range; the error
// names the filter's fields as the API calls them.
func (f Filter) Check() error {
	if f.Status != "" && !slices.Contains(Statuses, f.Status) {
		return fmt.Errorf("%w: status %q: want one of %s", ErrBadFilter, f.Status, strings.Join(Statuses, ", "))
	}
	if f.Limit < 1 || f.Limit > MaxPage {
		return fmt.Errorf("%w: limit %d: want 1..%d", ErrBadFilter, f.Limit, MaxPage)
	}
	return nil
}

// List reads one page of tasks, newest first: the cursor is the
// (created_at, id) of the last task of the previous page, so pages stay
// stable while new tasks arrive.
func List(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, f Filter) (Page, error) {
	if err := f.Check(); err != nil {
		return Page{}, err
	}
	after, afterID, err := parseCursor(f.Cursor)
	if err != nil {
		return Page{}, err
	}
	rows, err := q.Query(ctx, `SELECT `+summaryColumns+` FROM tasks
		WHERE ($1 = '' OR status = $1) AND ($2::timestamptz IS NULL OR (created_at, id) < ($2, $3))
		  AND ($5 OR parent_task_id IS NULL OR $6 <> '')`+searchSQL+`
		ORDER BY created_at DESC, id DESC LIMIT $4`, append([]any{f.Status, after, afterID, f.Limit + 1, f.WithChildren},
		f.searchArgs()...)...)
	if err != nil {
		return Page{}, fmt.Errorf("list tasks: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Summary, error) { return scanSummary(r) })
	if err != nil {
		return Page{}, fmt.Errorf("list tasks: %w", err)
	}
	page := Page{Tasks: list}
	if len(list) > f.Limit {
		page.Tasks = list[:f.Limit]
		last := list[f.Limit-1]
		c := cursorOf(last.CreatedAt, last.TaskID)
		page.NextCursor = &c
	}
	if page.Tasks == nil {
		page.Tasks = []Summary{}
	}
	return page, nil
}

// searchSQL is the search part of List's condition ($6..$12: searchArgs).
// A search by Q also finds child tasks.
var searchSQL = `
		  AND ($6 = '' OR id::text LIKE $6 || '%' OR source_video_key ILIKE '%' || $11 || '%'
		       OR source_file_name ILIKE '%' || $11 || '%')
		  AND ($7 = '' OR source_language = $7 OR target_language = $7 OR $7 = ANY (targets))
		  AND ($8::timestamptz IS NULL OR created_at >= $8) AND ($9::timestamptz IS NULL OR created_at < $9)
		  AND ($10 = '' OR error ILIKE '%' || $10 || '%' OR ` + attempt.ErrorLikeSQL("tasks.id", `'%' || $10 || '%'`) + `)
		  AND ($12 = '' OR project = $12)`

func (f Filter) searchArgs() []any {
	return []any{likeEscape(strings.ToLower(f.Q)), f.Language, f.Since, f.Until, likeEscape(f.Error), likeEscape(f.Q), f.Project}
}

// likeEscape makes s match itself in a LIKE pattern.
func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
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
	bad := fmt.Errorf("%w: cursor: not a cursor of this API (use nextCursor as given)", ErrBadFilter)
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
