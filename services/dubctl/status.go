package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/view"
	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// The read model's shapes as dubctl names them; `status --json`,
// `wait --json` and `list --json` print them as the console's API does.
type (
	taskView      = view.Task
	taskSummary   = view.Summary
	segmentCounts = view.SegmentCounts
)

// statusCmd builds `dubctl status`.
func statusCmd() *cobra.Command {
	return showCmd(&cobra.Command{
		Use:   "status TASK_ID [--json]",
		Short: "Show a task, every step attempt, its segments and, for a parent, its children",
	}, "print one JSON object (the console's GET /api/tasks/{id})", parseTaskID,
		func(ctx context.Context, b backend, id uuid.UUID) (*view.Task, error) { return b.Task(ctx, id) }, printStatus)
}

// printStatus writes the task for a reader.
func printStatus(w io.Writer, t *view.Task) error {
	fmt.Fprintf(w, "task      %s\n", t.TaskID)
	fmt.Fprintf(w, "status    %s\n", t.Status)
	fmt.Fprintf(w, "languages %s → %s", t.SourceLanguage, t.TargetLanguage)
	if t.SpeakerID != "" {
		fmt.Fprintf(w, " (speaker %s)", t.SpeakerID)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "source    %s\n", t.SourceVideoKey)
	if t.OutputVideoKey != "" {
		fmt.Fprintf(w, "output    %s\n", t.OutputVideoKey)
	}
	fmt.Fprintf(w, "trace     %s\n", t.TraceID)
	fmt.Fprintf(w, "created   %s, updated %s\n", t.CreatedAt.Local().Format(time.DateTime), t.UpdatedAt.Local().Format(time.DateTime))
	if t.Error != "" {
		fmt.Fprintf(w, "error     %s\n", t.Error)
	}
	if t.Waiting != nil {
		fmt.Fprintf(w, "waiting   %s: %s\n", t.Waiting.Step, t.Waiting.Message)
	}
	if t.NoSpeech() {
		fmt.Fprintln(w, "result    no speech found in the video")
	}
	fmt.Fprintf(w, "segments  %d total, %d translated, %d synthesized, %d failed synthesis\n",
		t.Segments.Total, t.Segments.Translated, t.Segments.Synthesized, t.Segments.FailedTTS)
	printLanguages(w, t)

	fmt.Fprintln(w, "\nsteps")
	steps := newTable(w, "  STEP", "STATUS", "ATTEMPTS", "PARTS", "DURATION")
	for _, s := range t.Steps {
		steps.row("  "+s.Step, s.Status, s.Attempts, len(s.Parts), span(s.StartedAt, s.FinishedAt))
	}
	if err := steps.flush(); err != nil {
		return err
	}
	if t.IsParent() {
		fmt.Fprintln(w, "  (translate, tts and mux_video run in each child)")
	}
	return printAttempts(w, t)
}

// printAttempts writes every attempt of the task, if it has any.
func printAttempts(w io.Writer, t *view.Task) error {
	attempts := newTable(w, "  STEP", "PART", "ATTEMPT", "STATUS", "WORKER", "STARTED", "FINISHED", "ERROR")
	n := 0
	for _, s := range t.Steps {
		for _, p := range s.Parts {
			for _, a := range p.Attempts {
				if n == 0 {
					fmt.Fprintln(w, "\nattempts")
				}
				n++
				finished := "-"
				if a.FinishedAt != nil {
					finished = a.FinishedAt.Local().Format("15:04:05.000")
				}
				attempts.row("  "+s.Step, orDash(p.Part), a.Attempt, a.Status, a.Worker,
					a.StartedAt.Local().Format("15:04:05.000"), finished, a.Error)
			}
		}
	}
	if n == 0 {
		return nil
	}
	return attempts.flush()
}

// span is the duration between two optional times, "-" when unknown.
func span(from, to *time.Time) string {
	if from == nil || to == nil {
		return "-"
	}
	return to.Sub(*from).Round(time.Millisecond).String()
}

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

// filter checks the flags and reads them as the list's filter.
func (o *listOptions) filter() (listFilter, error) {
	f := listFilter{Filter: view.Filter{Status: o.status, Q: strings.TrimSpace(o.query), Language: o.language,
		Error: o.errText, WithChildren: o.children, Limit: 1}, since: o.since, until: o.until}
	if err := f.Check(); err != nil {
		return f, usageError(fmt.Errorf("--status %q: want one of %v", o.status, view.Statuses))
	}
	if o.limit < 1 || o.limit > o.maxLimit {
		return f, usageError(fmt.Errorf("--limit %d: want 1..%d", o.limit, o.maxLimit))
	}
	var err error
	f.Since, f.Until, err = timeRange(o.since, o.until)
	return f, err
}

// listCmd builds `dubctl list`.
func listCmd() *cobra.Command {
	o := &listOptions{maxLimit: 10000}
	cmd := &cobra.Command{
		Use:   "list [--status S] [-q TEXT] [--language L] [--since T] [--until T] [--error TEXT] [--limit N] [--json]",
		Short: "List recent tasks, newest first, or those a search finds",
		Args:  exactArgs(0),
		RunE:  func(cmd *cobra.Command, _ []string) error { return runList(cmd, o) },
	}
	o.bind(cmd)
	return cmd
}

// searchCmd builds `dubctl search`: list with a query.
func searchCmd() *cobra.Command {
	o := &listOptions{maxLimit: 10000}
	cmd := &cobra.Command{
		Use:   "search TEXT [--language L] [--since T] [--status S] [--json]",
		Short: "Find tasks by id prefix, file name or source key (list -q TEXT)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.query = args[0]
			return runList(cmd, o)
		},
	}
	o.bind(cmd)
	_ = cmd.Flags().MarkHidden("query")
	return cmd
}

// runList reads and prints the tasks o selects.
func runList(cmd *cobra.Command, o *listOptions) error {
	f, err := o.filter()
	if err != nil {
		return err
	}
	return show(cmd, o.asJSON, func(ctx context.Context, b backend) ([]view.Summary, error) {
		return listTasks(ctx, b, f, o.limit)
	}, printTasks)
}

// listTasks reads up to limit tasks, page after page.
func listTasks(ctx context.Context, b backend, f listFilter, limit int) ([]view.Summary, error) {
	out := []view.Summary{}
	for len(out) < limit {
		f.Limit = min(view.MaxPage, limit-len(out))
		page, err := b.List(ctx, f)
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
	t := newTable(w, "TASK", "STATUS", "LANGS", "CREATED", "UPDATED", "ERROR")
	for _, task := range tasks {
		langs := task.TargetLanguage
		if task.IsParent() {
			langs = fmt.Sprint(task.TargetLanguages)
		}
		t.row(task.TaskID, task.Status, task.SourceLanguage+"→"+langs,
			task.CreatedAt.Local().Format(time.DateTime), task.UpdatedAt.Local().Format(time.DateTime), task.Error)
	}
	return t.flush()
}

// parseTaskID parses a task id argument (a usage error when malformed).
func parseTaskID(s string) (uuid.UUID, error) {
	id, err := uuid.Parse(s)
	if err != nil {
		return uuid.Nil, usageError(fmt.Errorf("task id %q: want a UUID", s))
	}
	return id, nil
}

// taskRun is the RunE of a command that takes a task id and options that
// check themselves: it parses the id, checks the options, then runs fn with
// the backend.
func taskRun(check func() error, fn func(ctx context.Context, cmd *cobra.Command, b backend, id uuid.UUID) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		id, err := parseTaskID(args[0])
		if err != nil {
			return err
		}
		if err := check(); err != nil {
			return err
		}
		return withBackend(cmd, func(ctx context.Context, b backend) error { return fn(ctx, cmd, b, id) })
	}
}
