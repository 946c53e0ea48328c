package tasks

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/dlq"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/dubflow/dubflow/services/dubctl/internal/shape"
	"github.com/spf13/cobra"
)

// listOptions are the flags of `dubctl list` and `dubctl search`: the
// filters of GET /api/tasks.
type listOptions struct {
	status, query, language, since, until, errText string
	children                                       bool
	limit                                          int
	asJSON                                         bool
	maxLimit                                       int
}

// bind adds the flags to cmd.
func (o *listOptions) bind(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.status, "status", "", "only tasks with this status")
	f.StringVarP(&o.query, "query", "q", "", "only tasks whose id starts with it, or whose file name or source key contains it")
	f.StringVar(&o.language, "language", "", "only tasks from or to this language")
	f.StringVar(&o.since, "since", "", "only tasks created since: an RFC 3339 time, a date, or a duration back (2h, 7d)")
	f.StringVar(&o.until, "until", "", "only tasks created before (as --since)")
	f.StringVar(&o.errText, "error", "", "only tasks whose error, or an error of a step attempt, contains it")
	f.BoolVar(&o.children, "children", false, "list the tasks of each language of a parent too")
	f.IntVar(&o.limit, "limit", 20, fmt.Sprintf("at most this many tasks (1..%d)", o.maxLimit))
	f.BoolVar(&o.asJSON, "json", false, "print a JSON array")
}

// listFilter is a task list's filter: the read model's, and since and
// until as given (the console reads them itself; they were checked here).
type listFilter struct {
	view.Filter
	given shape.Range
}

// filter checks the flags and reads them as the list's filter.
func (o *listOptions) filter() (listFilter, error) {
	f := listFilter{Filter: view.Filter{Status: o.status, Q: strings.TrimSpace(o.query), Language: o.language,
		Error: o.errText, WithChildren: o.children, Limit: 1}, given: shape.Range{Since: o.since, Until: o.until}}
	if err := f.Check(); err != nil {
		return f, cli.UsageError(fmt.Errorf("--status %q: want one of %v", o.status, view.Statuses))
	}
	if o.limit < 1 || o.limit > o.maxLimit {
		return f, cli.UsageError(fmt.Errorf("--limit %d: want 1..%d", o.limit, o.maxLimit))
	}
	var err error
	f.Since, f.Until, err = cli.TimeRange(dlq.ParseSince, o.since, o.until)
	return f, err
}

// listCmd builds `dubctl list`.
func (rm room) listCmd() *cobra.Command {
	o := &listOptions{maxLimit: 10000}
	cmd := &cobra.Command{
		Use:   "list [--status S] [-q TEXT] [--language L] [--since T] [--until T] [--error TEXT] [--limit N] [--json]",
		Short: "List recent tasks, newest first, or those a search finds",
		Args:  cli.ExactArgs(0),
		RunE:  func(cmd *cobra.Command, _ []string) error { return rm.runList(cmd, o) },
	}
	o.bind(cmd)
	return cmd
}

// searchCmd builds `dubctl search`: list with a query.
func (rm room) searchCmd() *cobra.Command {
	o := &listOptions{maxLimit: 10000}
	cmd := &cobra.Command{
		Use:   "search TEXT [--language L] [--since T] [--status S] [--json]",
		Short: "Find tasks by id prefix, file name or source key (list -q TEXT)",
		Args:  cli.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.query = args[0]
			return rm.runList(cmd, o)
		},
	}
	o.bind(cmd)
	_ = cmd.Flags().MarkHidden("query")
	return cmd
}

// runList reads and prints the tasks o selects.
func (rm room) runList(cmd *cobra.Command, o *listOptions) error {
	f, err := o.filter()
	if err != nil {
		return err
	}
	return cli.Show(cmd, rm.open, o.asJSON, func(ctx context.Context, b Backend) ([]view.Summary, error) {
		return listTasks(ctx, b, f, o.limit)
	}, printTasks)
}

// listTasks reads up to limit tasks, page after page.
func listTasks(ctx context.Context, b Backend, f listFilter, limit int) ([]view.Summary, error) {
	out := []view.Summary{}
	for len(out) < limit {
		f.Limit = min(view.MaxPage, limit-len(out))
		page, err := b.List(ctx, f.Filter, f.given)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Tasks...)
		if page.NextCursor == nil {
			break
		}
		f.Cursor = *page.NextCursor
	}
	return out, nil
}

// printTasks writes the tasks as a table.
func printTasks(w io.Writer, tasks []view.Summary) error {
	t := cli.NewTable(w, "TASK", "STATUS", "LANGS", "CREATED", "UPDATED", "ERROR")
	for _, task := range tasks {
		langs := task.TargetLanguage
		if task.IsParent() {
			langs = fmt.Sprint(task.TargetLanguages)
		}
		t.Row(task.TaskID, task.Status, task.SourceLanguage+"→"+langs,
			task.CreatedAt.Local().Format(time.DateTime), task.UpdatedAt.Local().Format(time.DateTime), task.Error)
	}
	return t.Flush()
}
