package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dubflow/dubflow/pkg/task"
	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// The console's API (services/console/API.md). With CONSOLE_URL and
// DUBFLOW_API_TOKEN set and no DATABASE_URL, dubctl talks to the console
// only, so that an operator needs no database, broker or storage
// credentials: submit, status, wait (with progress, then the download of the
// dub and its subtitles), list and dlq list/show/replay.

// consoleClient calls the console's API with the bearer token.
type consoleClient struct {
	base  string
	token string
	http  *http.Client
}

// consoleFromEnv returns a client when CONSOLE_URL and DUBFLOW_API_TOKEN
// are set and DATABASE_URL is not (with it, dubctl uses the database as it
// always did), nil otherwise.
func consoleFromEnv(getenv func(string) string) *consoleClient {
	base, token := getenv("CONSOLE_URL"), getenv("DUBFLOW_API_TOKEN")
	if base == "" || token == "" || getenv("DATABASE_URL") != "" {
		return nil
	}
	return &consoleClient{base: strings.TrimRight(base, "/"), token: token, http: &http.Client{}}
}

// consoleCommands are dubctl's commands over the console's API.
func (c *consoleClient) commands() []*cobra.Command {
	dlq := &cobra.Command{Use: "dlq", Short: "Inspect and replay dead letters (through the console)"}
	dlq.AddCommand(c.dlqListCmd(), c.dlqShowCmd(), c.dlqReplayCmd())
	return []*cobra.Command{c.submitCmd(), c.statusCmd(), c.waitCmd(), c.listCmd(), dlq, sampleCmd()}
}

// apiError is the console's error body.
type consoleError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// do sends a request and decodes a JSON answer into out; an answer other
// than 2xx is an error with the console's message.
func (c *consoleClient) do(ctx context.Context, method, path, contentType string, body io.Reader, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return fmt.Errorf("console %s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("console %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		var e consoleError
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if json.Unmarshal(b, &e) != nil || e.Message == "" {
			e.Message = strings.TrimSpace(string(b))
		}
		err := fmt.Errorf("console: %s (HTTP %d)", e.Message, resp.StatusCode)
		if resp.StatusCode == http.StatusBadRequest {
			return usageError(err)
		}
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("console %s %s: decode: %w", method, path, err)
	}
	return nil
}

// getJSON reads path into a generic JSON value (for --json output).
func (c *consoleClient) getJSON(ctx context.Context, path string) (json.RawMessage, error) {
	var raw json.RawMessage
	return raw, c.do(ctx, http.MethodGet, path, "", nil, &raw)
}

func (c *consoleClient) submitCmd() *cobra.Command {
	var o submitOptions
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "submit --input FILE [--source en] [--target es] [--speaker S] [--wait [--output FILE]]",
		Short: "Upload a video to the console and start dubbing it",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			id, err := c.upload(cmd.Context(), o)
			if err != nil {
				return err
			}
			if o.wait {
				return c.follow(cmd, id, followOptions{timeout: timeout, json: o.waitOpts.json, output: o.waitOpts.output})
			}
			if o.waitOpts.json {
				return c.printJSON(cmd, "/api/tasks/"+id)
			}
			fmt.Fprintln(cmd.OutOrStdout(), id)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.input, "input", "i", "", "video file to dub (required)")
	f.StringVar(&o.source, "source", "", "language spoken in the video (the console's default when empty)")
	f.StringVar(&o.target, "target", "", "language to dub into (the console's default when empty); several separated by commas (es,ca): one child task per language")
	f.StringVar(&o.speaker, "speaker", "", "voice of the dub")
	f.BoolVar(&o.wait, "wait", false, "follow the task until it ends")
	f.BoolVar(&o.waitOpts.json, "json", false, "print the task as JSON")
	f.DurationVar(&timeout, "timeout", 0, "with --wait: give up after this long (0: never)")
	f.StringVarP(&o.waitOpts.output, "output", "o", "", "with --wait: where to save the dubbed video (default ./<task_id>.mp4); SRTs go next to it")
	_ = cmd.MarkFlagRequired("input")
	return cmd
}

// upload streams the file to POST /api/tasks as a multipart form (never
// whole in memory) and returns the task id.
func (c *consoleClient) upload(ctx context.Context, o submitOptions) (string, error) {
	f, err := os.Open(o.input)
	if err != nil {
		return "", usageError(fmt.Errorf("input: %w", err))
	}
	defer f.Close()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		for _, kv := range [][2]string{{"source", o.source}, {"target", o.target}, {"speaker", o.speaker}} {
			if kv[1] != "" {
				_ = mw.WriteField(kv[0], kv[1])
			}
		}
		part, err := mw.CreateFormFile("video", filepath.Base(o.input))
		if err == nil {
			_, err = io.Copy(part, f)
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	var created struct {
		TaskID string `json:"taskId"`
	}
	if err := c.do(ctx, http.MethodPost, "/api/tasks", mw.FormDataContentType(), pr, &created); err != nil {
		return "", err
	}
	return created.TaskID, nil
}

func (c *consoleClient) printJSON(cmd *cobra.Command, path string) error {
	raw, err := c.getJSON(cmd.Context(), path)
	if err != nil {
		return err
	}
	return writeJSON(cmd.OutOrStdout(), raw)
}

// consoleTask is the part of GET /api/tasks/{id} status prints.
type consoleTask struct {
	TaskID         string    `json:"taskId"`
	Status         string    `json:"status"`
	SourceLanguage string    `json:"sourceLanguage"`
	TargetLanguage string    `json:"targetLanguage"`
	Error          string    `json:"error"`
	UpdatedAt      time.Time `json:"updatedAt"`
	Steps          []struct {
		Step       string `json:"step"`
		Status     string `json:"status"`
		Attempts   int    `json:"attempts"`
		DurationMS *int64 `json:"durationMs"`
	} `json:"steps"`
	Links struct {
		Output *string `json:"output"`
	} `json:"links"`
	Languages *consoleLanguages `json:"languages"`
}

// consoleLanguages is the "languages" object of GET /api/tasks/{id}: a
// parent's languages and children, or a child's parent (API.md).
type consoleLanguages struct {
	ParentTaskID    *uuid.UUID `json:"parentTaskId"`
	TargetLanguages []string   `json:"targetLanguages"`
	Children        []struct {
		TaskID         uuid.UUID `json:"taskId"`
		TargetLanguage string    `json:"targetLanguage"`
		Status         string    `json:"status"`
		Error          string    `json:"error"`
		OutputVideoKey string    `json:"outputVideoKey"`
		CreatedAt      time.Time `json:"createdAt"`
		UpdatedAt      time.Time `json:"updatedAt"`
	} `json:"children"`
}

// family is the same as database mode reads: nil for a task of one
// language.
func (l *consoleLanguages) family() *languagesView {
	if l == nil {
		return nil
	}
	f := &languagesView{Targets: l.TargetLanguages}
	if l.ParentTaskID != nil {
		f.ParentID = *l.ParentTaskID
	}
	for _, c := range l.Children {
		f.Children = append(f.Children, task.Child{ID: c.TaskID, TargetLanguage: c.TargetLanguage, Status: c.Status,
			Error: c.Error, OutputVideoKey: c.OutputVideoKey, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt})
	}
	if f.ParentID == uuid.Nil && len(f.Targets) == 0 {
		return nil
	}
	return f
}

func (c *consoleClient) statusCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status TASK_ID [--json]",
		Short: "Show a task and its steps (through the console)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseTaskID(args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return c.printJSON(cmd, "/api/tasks/"+id.String())
			}
			var t consoleTask
			if err := c.do(cmd.Context(), http.MethodGet, "/api/tasks/"+id.String(), "", nil, &t); err != nil {
				return err
			}
			// The keys in a column of 10, as database mode prints them.
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "task      %s\nstatus    %s\nlanguages %s → %s\nupdated   %s\n", t.TaskID, t.Status,
				t.SourceLanguage, t.TargetLanguage, t.UpdatedAt.Local().Format(time.DateTime))
			if t.Error != "" {
				fmt.Fprintf(out, "error     %s\n", t.Error)
			}
			if t.Links.Output != nil {
				fmt.Fprintf(out, "output    %s\n", *t.Links.Output)
			}
			// The block database mode prints: a parent's languages and
			// children, a child's parent.
			printLanguages(out, &taskView{Languages: t.Languages.family()})
			w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "\nSTEP\tSTATUS\tATTEMPTS\tDURATION")
			for _, s := range t.Steps {
				d := "-"
				if s.DurationMS != nil {
					d = (time.Duration(*s.DurationMS) * time.Millisecond).String()
				}
				fmt.Fprintf(w, "%s\t%s\t%d\t%s\n", s.Step, s.Status, s.Attempts, d)
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the console's JSON")
	return cmd
}

func (c *consoleClient) waitCmd() *cobra.Command {
	var o followOptions
	cmd := &cobra.Command{
		Use:   "wait TASK_ID [--output FILE] [--timeout D] [--json]",
		Short: "Follow a task until it ends and download the dub (through the console)",
		Long: `wait follows the task through the console's event stream, showing its
progress (units of work done: steps × parts), until it ends. When the task is
done it downloads the dubbed video to --output (default ./<task_id>.mp4) and
the subtitles (SRT) next to it, through the console's presigned links. A failed
task exits 1, a compensating one 4, a timeout 3.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseTaskID(args[0])
			if err != nil {
				return err
			}
			return c.follow(cmd, id.String(), o)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.json, "json", false, "print the task as JSON when it ends, without progress")
	f.DurationVar(&o.timeout, "timeout", 0, "give up after this long (0: never)")
	f.StringVarP(&o.output, "output", "o", "", "where to save the dubbed video (default ./<task_id>.mp4); SRTs go next to it")
	return cmd
}

// followOptions are the flags of wait and submit --wait.
type followOptions struct {
	timeout time.Duration
	json    bool
	output  string
}

// follow reads the task's event stream until it is done (exit 0; the dub
// is downloaded), failed (1) or compensating (4), or the timeout (3).
func (c *consoleClient) follow(cmd *cobra.Command, id string, o followOptions) error {
	ctx := cmd.Context()
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	var shown progressLine
	if !o.json {
		shown = progressLine{w: cmd.ErrOrStderr(), redraw: isTerminal(cmd.ErrOrStderr())}
	}
	status, err := c.waitForEnd(ctx, id, &shown)
	shown.end()
	if errors.Is(err, context.DeadlineExceeded) {
		return withCode(exitTimeout, fmt.Errorf("task %s still %s after %s", id, status, o.timeout))
	}
	if err != nil {
		return err
	}
	var saved []string
	if status == "done" {
		if saved, err = c.download(cmd.Context(), id, o.output); err != nil {
			return err
		}
	}
	if o.json {
		if err := c.printJSON(cmd, "/api/tasks/"+id); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(cmd.OutOrStdout(), "task %s %s\n", id, status)
		for _, p := range saved {
			fmt.Fprintln(cmd.OutOrStdout(), p)
		}
	}
	switch status {
	case "failed":
		return &quietError{withCode(exitFailed, fmt.Errorf("task %s failed", id))}
	case "compensating":
		return &quietError{withCode(exitCompensated, fmt.Errorf("task %s waits for tts_requeue", id))}
	}
	return nil
}

// waitForEnd follows GET /api/tasks/{id}/events until the task's status is
// done, failed or compensating, reconnecting when the stream drops (with
// Last-Event-ID: the console resends what was missed).
func (c *consoleClient) waitForEnd(ctx context.Context, id string, shown *progressLine) (string, error) {
	st := streamState{status: "unknown"}
	for {
		err := c.readEvents(ctx, id, &st, shown)
		switch {
		case st.status == "done" || st.status == "failed" || st.status == "compensating":
			return st.status, nil
		case ctx.Err() != nil:
			return st.status, ctx.Err()
		case err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF):
			return st.status, err
		}
		select {
		case <-ctx.Done():
			return st.status, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// streamState is what following a task has learnt: its status, the event
// stream's last id and when progress was last read.
type streamState struct {
	status   string
	lastID   string
	polledAt time.Time
}

// readEvents reads one connection of the event stream until the task ends
// or the stream does; every change refreshes the progress shown (at most
// once a second).
func (c *consoleClient) readEvents(ctx context.Context, id string, st *streamState, shown *progressLine) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/api/tasks/"+url.PathEscape(id)+"/events", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "text/event-stream")
	if st.lastID != "" {
		req.Header.Set("Last-Event-ID", st.lastID)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("console %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("console: follow task %s: HTTP %d", id, resp.StatusCode)
	}
	kind := ""
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "id: "); ok {
			st.lastID = v
			continue
		}
		if k, ok := strings.CutPrefix(line, "event: "); ok {
			kind = k
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		changed := false
		if kind == "task" {
			var ev struct{ Status string }
			if json.Unmarshal([]byte(data), &ev) == nil && ev.Status != st.status {
				st.status, changed = ev.Status, true
			}
		}
		if changed || kind == "reset" || time.Since(st.polledAt) >= time.Second {
			st.polledAt = time.Now()
			c.refreshProgress(ctx, id, shown)
		}
		if st.status == "done" || st.status == "failed" || st.status == "compensating" {
			return nil
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.EOF
}

// refreshProgress reads GET /api/tasks/{id}/realtime-status and shows it; a
// failed read only skips this refresh.
func (c *consoleClient) refreshProgress(ctx context.Context, id string, shown *progressLine) {
	var rt struct {
		Status   string `json:"status"`
		Progress struct {
			Total, Done, Pending, Failed int
		} `json:"progress"`
		Metrics struct {
			EstimatedCompletion *time.Time `json:"estimatedCompletion"`
		} `json:"metrics"`
	}
	if c.do(ctx, http.MethodGet, "/api/tasks/"+url.PathEscape(id)+"/realtime-status", "", nil, &rt) != nil {
		return
	}
	p := rt.Progress
	text := fmt.Sprintf("%-12s %s %d/%d units done", rt.Status, bar(p.Done, p.Total, 20), p.Done, p.Total)
	if p.Failed > 0 {
		text += fmt.Sprintf(", %d failed", p.Failed)
	}
	if eta := rt.Metrics.EstimatedCompletion; eta != nil && rt.Status == "running" {
		text += ", done about " + eta.Local().Format(time.TimeOnly)
	}
	shown.show(text)
}

// bar draws done of total in width cells.
func bar(done, total, width int) string {
	n := 0
	if total > 0 {
		n = min(width, done*width/total)
	}
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + "]"
}

// progressLine shows the progress of a task: redrawn in place on a
// terminal, one line per change otherwise; a zero value (--json) shows
// nothing.
type progressLine struct {
	w      io.Writer
	redraw bool
	last   string
}

func (p *progressLine) show(text string) {
	if p.w == nil || text == p.last {
		return
	}
	p.last = text
	if p.redraw {
		fmt.Fprintf(p.w, "\r\033[K%s", text)
		return
	}
	fmt.Fprintf(p.w, "%s %s\n", time.Now().Format(time.TimeOnly), text)
}

// end ends a redrawn line.
func (p *progressLine) end() {
	if p.w != nil && p.redraw && p.last != "" {
		fmt.Fprintln(p.w)
	}
}

// download saves a done task's dub to dest (default ./<task_id>.mp4) and
// its subtitles next to it (<dest without .mp4>.<lang>.srt) through the
// console's presigned links, and returns the paths written. A task without
// an output (no speech) saves nothing.
func (c *consoleClient) download(ctx context.Context, id, dest string) ([]string, error) {
	var t struct {
		Links struct {
			Output    *string `json:"output"`
			Subtitles []struct {
				Language string `json:"language"`
				URL      string `json:"url"`
			} `json:"subtitles"`
		} `json:"links"`
	}
	if err := c.do(ctx, http.MethodGet, "/api/tasks/"+url.PathEscape(id), "", nil, &t); err != nil {
		return nil, err
	}
	if t.Links.Output == nil {
		return nil, nil
	}
	if dest == "" {
		dest = id + ".mp4"
	}
	limit, err := outputLimit()
	if err != nil {
		return nil, err
	}
	if err := fetchTo(ctx, c.http, *t.Links.Output, dest, limit); err != nil {
		return nil, err
	}
	saved := []string{dest}
	base := strings.TrimSuffix(dest, filepath.Ext(dest))
	for _, s := range t.Links.Subtitles {
		if !languagePattern.MatchString(s.Language) {
			return saved, fmt.Errorf("subtitles: unexpected language %q", s.Language)
		}
		p := base + "." + s.Language + ".srt"
		if err := fetchTo(ctx, c.http, s.URL, p, 16<<20); err != nil {
			return saved, err
		}
		saved = append(saved, p)
	}
	return saved, nil
}

// languagePattern is a language code fit for a file name.
var languagePattern = regexp.MustCompile(`^[a-z]{2,3}([-_][A-Za-z0-9]{2,8})?$`)

// fetchTo downloads link (a presigned URL: no token is sent) to path, at
// most limit bytes, through a temporary file renamed into place.
func fetchTo(ctx context.Context, client *http.Client, link, path string, limit int64) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, link, nil)
	if err != nil {
		return fmt.Errorf("download %s: %w", path, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("download %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("download %s: HTTP %d from the object store", path, resp.StatusCode)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("download %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("download %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	n, err := io.Copy(tmp, io.LimitReader(resp.Body, limit+1))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		return fmt.Errorf("download %s: %w", path, err)
	case n > limit:
		return fmt.Errorf("download %s: more than %d bytes", path, limit)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("download %s: %w", path, err)
	}
	return nil
}

func (c *consoleClient) listCmd() *cobra.Command {
	var (
		status string
		limit  int
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "list [--status S] [--limit N] [--json]",
		Short: "List recent tasks, newest first (through the console)",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{"status": {status}, "limit": {fmt.Sprint(limit)}}
			var page struct {
				Tasks []consoleTask `json:"tasks"`
			}
			if err := c.do(cmd.Context(), http.MethodGet, "/api/tasks?"+q.Encode(), "", nil, &page); err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), page.Tasks)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TASK\tSTATUS\tLANGS\tUPDATED\tERROR")
			for _, t := range page.Tasks {
				fmt.Fprintf(tw, "%s\t%s\t%s→%s\t%s\t%s\n", t.TaskID, t.Status, t.SourceLanguage, t.TargetLanguage,
					t.UpdatedAt.Local().Format(time.DateTime), t.Error)
			}
			return tw.Flush()
		},
	}
	f := cmd.Flags()
	f.StringVar(&status, "status", "", "only tasks with this status")
	f.IntVar(&limit, "limit", 20, "at most this many tasks (1..200)")
	f.BoolVar(&asJSON, "json", false, "print a JSON array")
	return cmd
}

// consoleDeadLetter is a dead letter as the console lists it.
type consoleDeadLetter struct {
	ID            int64      `json:"id"`
	TaskID        *string    `json:"taskId"`
	Step          string     `json:"step"`
	Attempt       int        `json:"attempt"`
	ErrorClass    string     `json:"errorClass"`
	Source        string     `json:"source"`
	FailureReason string     `json:"failureReason"`
	FailedAt      time.Time  `json:"failedAt"`
	ReplayedAt    *time.Time `json:"replayedAt"`
	ReplayCount   int        `json:"replayCount"`
}

func (c *consoleClient) dlqListCmd() *cobra.Command {
	var (
		stepName, since string
		pending, asJSON bool
		limit           int
	)
	cmd := &cobra.Command{
		Use:   "list [--step S] [--since T] [--pending] [--json]",
		Short: "List dead letters, newest first",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{"step": {stepName}, "since": {since}, "limit": {fmt.Sprint(limit)},
				"pending": {fmt.Sprint(pending)}}
			var out struct {
				DeadLetters []consoleDeadLetter `json:"deadLetters"`
			}
			if err := c.do(cmd.Context(), http.MethodGet, "/api/dead-letters?"+q.Encode(), "", nil, &out); err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), out.DeadLetters)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tFAILED\tTASK\tSTEP\tATTEMPT\tCLASS\tSOURCE\tREPLAYED\tREASON")
			for _, d := range out.DeadLetters {
				task, replayed := "-", "no"
				if d.TaskID != nil {
					task = *d.TaskID
				}
				if d.ReplayedAt != nil {
					replayed = fmt.Sprintf("%s (%d×)", d.ReplayedAt.Local().Format(time.DateTime), d.ReplayCount)
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", d.ID, d.FailedAt.Local().Format(time.DateTime),
					task, d.Step, d.Attempt, d.ErrorClass, d.Source, replayed, shorten(d.FailureReason, 100))
			}
			return tw.Flush()
		},
	}
	f := cmd.Flags()
	f.StringVar(&stepName, "step", "", "only dead letters of this step")
	f.StringVar(&since, "since", "", "only those failed since: an RFC 3339 time, a date, or a duration back (2h, 7d)")
	f.BoolVar(&pending, "pending", false, "only those not replayed yet")
	f.IntVar(&limit, "limit", 100, "at most this many (1..1000)")
	f.BoolVar(&asJSON, "json", false, "print a JSON array")
	return cmd
}

func (c *consoleClient) dlqShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Show one dead letter with its original message (JSON)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			return c.printJSON(cmd, fmt.Sprintf("/api/dead-letters/%d", id))
		},
	}
}

func (c *consoleClient) dlqReplayCmd() *cobra.Command {
	var force, asJSON bool
	cmd := &cobra.Command{
		Use:   "replay ID [--force]",
		Short: "Publish a dead letter's message again with a fresh retry budget",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			body := strings.NewReader(fmt.Sprintf(`{"force":%t}`, force))
			var r struct {
				ID      int64  `json:"id"`
				TaskID  string `json:"taskId"`
				Step    string `json:"step"`
				Attempt int    `json:"attempt"`
			}
			path := fmt.Sprintf("/api/dead-letters/%d/replay", id)
			if err := c.do(cmd.Context(), http.MethodPost, path, "application/json", body, &r); err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), r)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "dead letter %d: task %s %s republished as attempt %d\n", r.ID, r.TaskID, r.Step, r.Attempt)
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "replay a dead letter that was replayed before")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print what was replayed as JSON")
	return cmd
}
