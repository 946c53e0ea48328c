package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// The console-mode wait: progress from the event stream, then the download
// of the dub and its subtitles.

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
	case taskFailed, taskCancelled:
		return &quietError{withCode(exitFailed, fmt.Errorf("task %s %s", id, status))}
	case "compensating":
		return &quietError{withCode(exitCompensated, fmt.Errorf("task %s waits for tts_requeue", id))}
	}
	return nil
}

// waitForEnd follows GET /api/tasks/{id}/events until the task's status is
// done, failed, cancelled or compensating, reconnecting when the stream drops (with
// Last-Event-ID: the console resends what was missed).
func (c *consoleClient) waitForEnd(ctx context.Context, id string, shown *progressLine) (string, error) {
	st := streamState{status: "unknown"}
	for {
		err := c.readEvents(ctx, id, &st, shown)
		switch {
		case st.status == "done" || st.status == "failed" || st.status == taskCancelled || st.status == "compensating":
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
		if st.status == "done" || st.status == "failed" || st.status == taskCancelled || st.status == "compensating" {
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
