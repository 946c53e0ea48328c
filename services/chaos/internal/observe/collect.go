package observe

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/services/chaos/internal/report"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// MaxOutputBytes bounds the download of one output video.
const MaxOutputBytes = 512 << 20

// taskRow is what the checks read of a task.
type taskRow struct {
	id     uuid.UUID
	status string
	errMsg string
	output string
	result []byte
	// targets is how many languages a parent dubs into (0 for any other
	// task); children how many child tasks it has; child whether the task
	// is one.
	targets, children int
	child             bool
}

// Collect fills s from the database, the object store and the observer.
func Collect(ctx context.Context, pool *pgxpool.Pool, objects *blob.Store, obs *Observer, tmp string, s *report.Summary) error {
	tasks, err := readTasks(ctx, pool)
	if err != nil {
		return err
	}
	s.Tasks = len(tasks)
	events, bad := obs.snapshot()
	s.BadEvents = bad
	for _, t := range tasks {
		id := t.id.String()
		if t.targets > 0 {
			s.Parents++
		}
		if t.child {
			s.Children++
		}
		switch t.status {
		case "done":
			s.Done++
		case "failed", "cancelled": // ended, but not done
			s.Failed = append(s.Failed, report.Finding{Task: id, Detail: t.status + ", error: " + OneLine(t.errMsg, 200) + history(ctx, pool, t.id)})
		default:
			s.Stuck = append(s.Stuck, report.Finding{Task: id, Detail: "status " + t.status + history(ctx, pool, t.id)})
		}
		ev := events[t.id]
		if ev.succeeded > 1 {
			s.MultiSuccess = append(s.MultiSuccess, report.Finding{Task: id, Detail: fmt.Sprintf("%d deliveries of event.task.succeeded, %d distinct message ids", ev.succeeded, len(ev.ids))})
		}
		if len(ev.ids) > 1 {
			s.MultiSuccessDistinct = append(s.MultiSuccessDistinct, report.Finding{Task: id, Detail: fmt.Sprintf("%d distinct success events", len(ev.ids))})
		}
		if t.status == "done" && ev.succeeded == 0 {
			s.MissingSuccess = append(s.MissingSuccess, report.Finding{Task: id, Detail: "done, but no event.task.succeeded reached the integrator queue"})
		}
	}
	if err := checkOutputs(ctx, objects, tasks, tmp, s); err != nil {
		return err
	}
	if err := duplicateParts(ctx, pool, s); err != nil {
		return err
	}
	if err := redrives(ctx, pool, s); err != nil {
		return err
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM outbox`).Scan(&s.OutboxLeft); err != nil {
		return fmt.Errorf("count outbox: %w", err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM dead_letters`).Scan(&s.DeadLetters); err != nil {
		return fmt.Errorf("count dead letters: %w", err)
	}
	return nil
}

// readTasks reads every task, oldest first.
func readTasks(ctx context.Context, pool *pgxpool.Pool) ([]taskRow, error) {
	rows, err := pool.Query(ctx, `SELECT t.id, t.status, t.error, t.output_video_key, t.result::text,
		       coalesce(cardinality(t.targets), 0), (SELECT count(*) FROM tasks c WHERE c.parent_task_id = t.id),
		       t.parent_task_id IS NOT NULL
		  FROM tasks t ORDER BY t.created_at`)
	if err != nil {
		return nil, fmt.Errorf("read tasks: %w", err)
	}
	tasks, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (taskRow, error) {
		var t taskRow
		var result string
		err := r.Scan(&t.id, &t.status, &t.errMsg, &t.output, &result, &t.targets, &t.children, &t.child)
		t.result = []byte(result)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("read tasks: %w", err)
	}
	return tasks, nil
}

// history is the task's last step attempts, as evidence.
func history(ctx context.Context, pool *pgxpool.Pool, id uuid.UUID) string {
	rows, err := pool.Query(ctx, `SELECT step, part, attempt, status, error FROM task_steps WHERE task_id = $1
		ORDER BY started_at DESC, id DESC LIMIT 4`, id)
	if err != nil {
		return "; steps: " + err.Error()
	}
	var parts []string
	for rows.Next() {
		var step, part, status, e string
		var attempt int
		if err := rows.Scan(&step, &part, &attempt, &status, &e); err != nil {
			return "; steps: " + err.Error()
		}
		p := fmt.Sprintf("%s#%d %s", step, attempt, status)
		if part != "" {
			p = fmt.Sprintf("%s[%s]#%d %s", step, OneLine(part, 20), attempt, status)
		}
		if e != "" {
			p += " (" + OneLine(e, 120) + ")"
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return "; no step ever claimed"
	}
	return "; last steps: " + strings.Join(parts, ", ")
}

// checkOutputs downloads each done task's output and probes it: it must
// hold a video and an audio stream.
func checkOutputs(ctx context.Context, objects *blob.Store, tasks []taskRow, tmp string, s *report.Summary) error {
	for _, t := range tasks {
		if t.status != "done" {
			continue
		}
		id := t.id.String()
		if t.targets > 0 {
			// A parent has no video of its own: its children have one each.
			if t.children != t.targets {
				s.InvalidOutputs = append(s.InvalidOutputs, report.Finding{Task: id, Detail: fmt.Sprintf("parent of %d languages done with %d child tasks", t.targets, t.children)})
				continue
			}
			s.ValidOutputs++
			continue
		}
		if strings.Contains(string(t.result), "no_speech") {
			s.InvalidOutputs = append(s.InvalidOutputs, report.Finding{Task: id, Detail: "done without output: no speech recognized in a real-speech clip"})
			continue
		}
		if t.output == "" {
			s.InvalidOutputs = append(s.InvalidOutputs, report.Finding{Task: id, Detail: "done, but the task names no output_video_key"})
			continue
		}
		path := filepath.Join(tmp, id+".mp4")
		if err := objects.GetFile(ctx, t.output, path, MaxOutputBytes); err != nil {
			s.InvalidOutputs = append(s.InvalidOutputs, report.Finding{Task: id, Detail: "output " + t.output + ": " + OneLine(err.Error(), 160)})
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, time.Minute)
		_, err := media.ProbeInput(pctx, path, media.Limits{RequireAudio: true, RequireVideo: true})
		cancel()
		_ = os.Remove(path)
		if err != nil {
			s.InvalidOutputs = append(s.InvalidOutputs, report.Finding{Task: id, Detail: "output " + t.output + ": " + OneLine(err.Error(), 160)})
			continue
		}
		s.ValidOutputs++
	}
	return nil
}

func duplicateParts(ctx context.Context, pool *pgxpool.Pool, s *report.Summary) error {
	rows, err := pool.Query(ctx, `SELECT task_id, step, part, count(*) FROM task_steps WHERE status = 'succeeded'
		GROUP BY task_id, step, part HAVING count(*) > 1 ORDER BY task_id`)
	if err != nil {
		return fmt.Errorf("find duplicate succeeded parts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id uuid.UUID
		var step, part string
		var n int
		if err := rows.Scan(&id, &step, &part, &n); err != nil {
			return err
		}
		s.DuplicateParts = append(s.DuplicateParts, report.Finding{Task: id.String(), Detail: fmt.Sprintf("%s part %q succeeded %d times", step, part, n)})
	}
	return rows.Err()
}

// redrives counts the reconciler's replays (step_replays rows it wrote)
// and those of a step that was only waiting: an earlier attempt of the same
// part started after the re-drive, so its message had not been lost.
func redrives(ctx context.Context, pool *pgxpool.Pool, s *report.Summary) error {
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM step_replays WHERE reason LIKE 'reconciler:%'`).Scan(&s.Redrives); err != nil {
		return fmt.Errorf("count re-drives: %w", err)
	}
	rows, err := pool.Query(ctx, `SELECT r.task_id, r.step, r.part, r.base_attempt, r.reason, r.created_at,
		       s.attempt, s.started_at, s.status
		  FROM step_replays r
		  JOIN LATERAL (SELECT attempt, started_at, status FROM task_steps s
		                 WHERE s.task_id = r.task_id AND s.step = r.step AND s.part = r.part
		                   AND s.attempt < r.base_attempt AND s.started_at >= r.created_at
		                 ORDER BY s.started_at LIMIT 1) s ON true
		 WHERE r.reason LIKE 'reconciler:%'
		 ORDER BY r.created_at`)
	if err != nil {
		return fmt.Errorf("find re-drives of waiting steps: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id uuid.UUID
		var step, part, reason, status string
		var base, attempt int
		var at, started time.Time
		if err := rows.Scan(&id, &step, &part, &base, &reason, &at, &attempt, &started, &status); err != nil {
			return err
		}
		s.WaitingRedrives = append(s.WaitingRedrives, report.Finding{Task: id.String(), Detail: fmt.Sprintf(
			"%s re-driven as attempt %d at %s (%q); attempt %d was still on its way and started %s later (%s)",
			step, base, at.UTC().Format("15:04:05.000"), reason, attempt, started.Sub(at).Round(time.Millisecond), status)})
	}
	return rows.Err()
}

// OneLine shortens text to n runes on one line.
func OneLine(text string, n int) string {
	text = strings.Join(strings.Fields(text), " ")
	r := []rune(text)
	if len(r) > n {
		return string(r[:n]) + "…"
	}
	return text
}

// MetricSum follows counters on a /metrics page across restarts of the
// process serving it: it adds each increase, and after a reset (a value
// below the last one) the whole new value.
type MetricSum struct {
	mu     sync.Mutex
	prefix string
	last   map[string]float64
	total  map[string]float64
}

func NewMetricSum(prefix string) *MetricSum {
	return &MetricSum{prefix: prefix, last: map[string]float64{}, total: map[string]float64{}}
}

// Scrape reads url once; unreachable pages (the process is down) are
// skipped.
func (m *MetricSum) Scrape(ctx context.Context, url string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return
	}
	c := http.Client{Timeout: 3 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return
	}
	m.add(bufio.NewScanner(resp.Body))
}

func (m *MetricSum) add(sc *bufio.Scanner) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, m.prefix) {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		series := line[:i]
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		if last, ok := m.last[series]; ok && v >= last {
			m.total[series] += v - last
		} else {
			m.total[series] += v
		}
		m.last[series] = v
	}
}

// Restarted forgets the last values: the process serving the page
// started again, so its counters start from zero.
func (m *MetricSum) Restarted() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.last = map[string]float64{}
}

// ByLabel sums the totals by the value of label.
func (m *MetricSum) ByLabel(label string) map[string]float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]float64{}
	for series, v := range m.total {
		key := "?"
		if i := strings.Index(series, label+`="`); i >= 0 {
			rest := series[i+len(label)+2:]
			key = rest[:strings.IndexByte(rest, '"')]
		}
		out[key] += v
	}
	return out
}
