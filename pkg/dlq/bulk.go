package dlq

import (
	"context"
	"errors"
	"fmt"
	"github.com/dubflow/dubflow/pkg/wire"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/internal/deadletter"
	"github.com/dubflow/dubflow/pkg/store"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Match selects dead letters for a bulk replay or purge. Zero fields
// match every dead letter.
type Match struct {
	// Step and ErrorClass keep only dead letters of this step, of this
	// error class.
	Step, ErrorClass string
	// Since and Until keep only those that failed in [Since, Until).
	Since, Until time.Time
	// Pending keeps only those not replayed yet.
	Pending bool
	// Project, when not "", keeps the dead letters of that project's
	// tasks (a project's token's bulk action).
	Project string
}

// where is m as a condition on dead_letters ($1..$6, args gives them).
const where = `($1 = '' OR step = $1) AND ($2 = '' OR error_class = $2)
	AND ($3::timestamptz IS NULL OR failed_at >= $3) AND ($4::timestamptz IS NULL OR failed_at < $4)
	AND (NOT $5 OR replayed_at IS NULL)
	AND ($6 = '' OR task_id IN (SELECT t.id FROM tasks t WHERE t.project = $6))`

func (m Match) args() []any {
	var since, until *time.Time
	if !m.Since.IsZero() {
		since = &m.Since
	}
	if !m.Until.IsZero() {
		until = &m.Until
	}
	return []any{m.Step, m.ErrorClass, since, until, m.Pending, m.Project}
}

// Count returns how many dead letters m matches, and how many of those a
// replay would republish (pending, with a task).
func Count(ctx context.Context, q store.Querier, m Match) (matched, replayable int, err error) {
	err = q.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE replayed_at IS NULL AND task_id IS NOT NULL)
		FROM dead_letters WHERE `+where, m.args()...).Scan(&matched, &replayable)
	if err != nil {
		return 0, 0, fmt.Errorf("count dead letters: %w", err)
	}
	return matched, replayable, nil
}

// ReplayMatching replays every dead letter m matches that was not replayed
// yet and has a task, oldest first, each part once (as ReplayAll does).
func ReplayMatching(ctx context.Context, pool *pgxpool.Pool, pub Publisher, m Match) ([]Replayed, error) {
	rows, err := pool.Query(ctx, `SELECT id FROM dead_letters
		WHERE replayed_at IS NULL AND task_id IS NOT NULL AND `+where+` ORDER BY id`, m.args()...)
	if err != nil {
		return nil, fmt.Errorf("list dead letters to replay: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("list dead letters to replay: %w", err)
	}
	return replayIDs(ctx, pool, pub, ids)
}

// Purge deletes every dead letter m matches and keeps each, as it was, in
// dead_letters_archive with the time and by (who purged), in one
// statement. It returns the ids purged.
func Purge(ctx context.Context, q store.Querier, m Match, by string) ([]int64, error) {
	return deadletter.Purge(ctx, q, where, m.args(), by)
}

// BulkRequest is a bulk replay or purge as a door receives it (the body of
// POST /api/dead-letters/replay and /purge; dubctl dlq replay --all and dlq
// purge): a filter, every field optional (since and until in ParseSince's
// forms), and DryRun, which only counts.
type BulkRequest struct {
	Step       string `json:"step"`
	ErrorClass string `json:"errorClass"`
	Since      string `json:"since"`
	Until      string `json:"until"`
	Pending    bool   `json:"pending"`
	DryRun     bool   `json:"dryRun"`
}

// ErrBadFilter is what BulkRequest.Match's error is (errors.Is) for a
// filter it cannot read; the error's text is the reason alone.
var ErrBadFilter = errors.New("bad filter")

// Match checks the filter and reads it as a Match (since and until
// relative to now). Its error is ErrBadFilter; its text is the same at
// every door.
func (b BulkRequest) Match(now time.Time) (Match, error) {
	if b.Step != "" && wire.RoutingKey(b.Step) == "" {
		return Match{}, &refusal{msg: fmt.Sprintf("step %q: want one of %v", shortValue(b.Step), wire.Pipeline), sentinel: ErrBadFilter}
	}
	m := Match{Step: b.Step, ErrorClass: b.ErrorClass, Pending: b.Pending}
	var err error
	if m.Since, err = ParseSince(b.Since, now); err != nil {
		return Match{}, &refusal{msg: err.Error(), sentinel: ErrBadFilter}
	}
	if m.Until, err = ParseSince(b.Until, now); err != nil {
		return Match{}, &refusal{msg: strings.Replace(err.Error(), "since", "until", 1), sentinel: ErrBadFilter}
	}
	return m, nil
}

// filter is the request's filter as BulkResult echoes it.
func (b BulkRequest) filter() map[string]string {
	return map[string]string{"step": b.Step, "errorClass": b.ErrorClass, "since": b.Since, "until": b.Until,
		"pending": fmt.Sprint(b.Pending)}
}

// shortValue cuts a value echoed in an error to a readable length.
func shortValue(v string) string {
	if r := []rune(v); len(r) > 40 {
		return string(r[:40]) + "…"
	}
	return v
}

// BulkResult is what a bulk replay or purge did, in the read model's JSON:
// Matched counts the dead letters the filter selects; a replay republishes
// the Replayable ones (pending, with a task), a purge archives and deletes
// every matched one. With DryRun nothing is changed and Replayed and
// Purged are null.
type BulkResult struct {
	DryRun     bool              `json:"dryRun"`
	Matched    int               `json:"matched"`
	Replayable int               `json:"replayable"`
	Replayed   []Replayed        `json:"replayed"`
	Purged     []int64           `json:"purged"`
	Errors     []string          `json:"errors,omitempty"`
	Filter     map[string]string `json:"filter"`
}

// AuditDetail is what the audit log records of r (audit.Entry's Detail),
// the same from every door.
func (r BulkResult) AuditDetail() map[string]any {
	d := map[string]any{"filter": r.Filter, "dryRun": r.DryRun, "matched": r.Matched}
	switch {
	case r.DryRun:
	case r.Purged != nil:
		d["purged"] = len(r.Purged)
	default:
		d["replayed"] = len(r.Replayed)
	}
	return d
}

// BulkReplay replays every pending dead letter with a task that m matches
// (ReplayMatching), or with b.DryRun counts them. Dead letters that could
// not be replayed are named in the result's Errors, the others replayed.
func BulkReplay(ctx context.Context, pool *pgxpool.Pool, pub Publisher, b BulkRequest, m Match) (BulkResult, error) {
	out, err := countBulk(ctx, pool, b, m)
	if err != nil || b.DryRun {
		return out, err
	}
	res, err := ReplayMatching(ctx, pool, pub, m)
	if err != nil {
		out.Errors = append(out.Errors, err.Error())
	}
	out.Replayed = make([]Replayed, 0, len(res))
	out.Replayed = append(out.Replayed, res...)
	return out, nil
}

// BulkPurge deletes every dead letter m matches, keeping each in
// dead_letters_archive with by (Purge), or with b.DryRun counts them.
func BulkPurge(ctx context.Context, pool *pgxpool.Pool, b BulkRequest, m Match, by string) (BulkResult, error) {
	out, err := countBulk(ctx, pool, b, m)
	if err != nil || b.DryRun {
		return out, err
	}
	if out.Purged, err = Purge(ctx, pool, m, by); err != nil {
		return out, err
	}
	out.Matched = len(out.Purged)
	if out.Purged == nil {
		out.Purged = []int64{}
	}
	return out, nil
}

// countBulk starts a bulk result: the filter and what it matches.
func countBulk(ctx context.Context, pool *pgxpool.Pool, b BulkRequest, m Match) (BulkResult, error) {
	out := BulkResult{DryRun: b.DryRun, Filter: b.filter()}
	var err error
	out.Matched, out.Replayable, err = Count(ctx, pool, m)
	return out, err
}

// refusal is an error whose text is its reason alone and that is its
// sentinel (ErrBadFilter) for errors.Is: a door answers the reason as it
// is.
type refusal struct {
	msg      string
	sentinel error
}

func (e *refusal) Error() string        { return e.msg }
func (e *refusal) Is(target error) bool { return target == e.sentinel }
