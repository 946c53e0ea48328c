package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/testenv"
)

// cost is what a step's worker spent on the database and the broker, from
// its own counters (/metrics): statements run for the step and the rows
// they wrote (dubflow_db_*_total with the step's label; lease extensions,
// which follow the step's time rather than its work, apart), messages it
// published (dubflow_broker_publishes_total) and deliveries it settled
// (dubflow_step_messages_total: each an ack or a hand-back).
type cost struct {
	Statements, Leases, Rows, Published, Settled float64
}

// Broker is the messages the step cost the broker: published and settled.
func (c cost) Broker() float64 { return c.Published + c.Settled }

func (c cost) minus(o cost) cost {
	return cost{c.Statements - o.Statements, c.Leases - o.Leases, c.Rows - o.Rows,
		c.Published - o.Published, c.Settled - o.Settled}
}

// costs reads every worker's counters.
func (s *stack) costs(tb testing.TB) map[string]cost {
	tb.Helper()
	out := map[string]cost{}
	for _, w := range workers {
		m := scrape(tb, s.procs[w].Addr)
		out[w] = cost{
			Statements: m.sum("dubflow_db_statements_total", "step", w),
			Leases:     m.sum("dubflow_db_statements_total", "step", w+":lease"),
			Rows:       m.sum("dubflow_db_rows_written_total", "step", w),
			Published:  m.sum("dubflow_broker_publishes_total", "result", "ack"),
			Settled:    m.sum("dubflow_step_messages_total", "", ""),
		}
	}
	return out
}

// costsSince is every worker's cost since before, once the outbox is empty
// (the runtime deletes published rows shortly after a step's commit).
func (s *stack) costsSince(tb testing.TB, ctx context.Context, before map[string]cost) map[string]cost {
	tb.Helper()
	testenv.EventuallyWithin(tb, time.Minute, "the outbox to empty", func() bool {
		var n int
		err := s.db.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox`).Scan(&n)
		return err == nil && n == 0
	})
	now := s.costs(tb)
	for w, c := range now {
		now[w] = c.minus(before[w])
	}
	return now
}

// sample is one line of a /metrics page.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

type metricsPage []sample

var labelRE = regexp.MustCompile(`(\w+)="((?:[^"\\]|\\.)*)"`)

// scrape reads the Prometheus text page at http://addr/metrics.
func scrape(tb testing.TB, addr string) metricsPage {
	tb.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		tb.Fatalf("scrape %s: %v", addr, err)
	}
	defer resp.Body.Close()
	var page metricsPage
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cut := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[cut+1:], 64)
		if cut < 0 || err != nil {
			tb.Fatalf("scrape %s: line %q", addr, line)
		}
		name, labels, _ := strings.Cut(line[:cut], "{")
		smp := sample{name: name, labels: map[string]string{}, value: v}
		for _, m := range labelRE.FindAllStringSubmatch(labels, -1) {
			smp.labels[m[1]] = m[2]
		}
		page = append(page, smp)
	}
	if err := sc.Err(); err != nil {
		tb.Fatalf("scrape %s: %v", addr, err)
	}
	return page
}

// sum adds the samples of name whose label key is value (every sample of
// name when key is empty).
func (p metricsPage) sum(name, key, value string) float64 {
	var n float64
	for _, s := range p {
		if s.name == name && (key == "" || s.labels[key] == value) {
			n += s.value
		}
	}
	return n
}

// costTable prints each worker's cost divided by tasks.
func costTable(c map[string]cost, tasks float64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-14s %11s %9s %10s %10s %9s %8s\n", "per task", "statements", "leases", "rows", "published", "settled", "broker")
	for _, w := range workers {
		x := c[w]
		fmt.Fprintf(&b, "%-14s %11.1f %9.1f %10.1f %10.1f %9.1f %8.1f\n", w, x.Statements/tasks, x.Leases/tasks,
			x.Rows/tasks, x.Published/tasks, x.Settled/tasks, x.Broker()/tasks)
	}
	return b.String()
}
