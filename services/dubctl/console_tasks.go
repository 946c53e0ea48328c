package main

import (
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/dubflow/dubflow/pkg/consoleapi"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// The console-mode task commands: submit (with the upload), status and list.

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

// consoleTask is the part of GET /api/tasks/{id} status prints.
type consoleTask struct {
	consoleapi.TaskSummary
	Steps []struct {
		Step       string `json:"step"`
		Status     string `json:"status"`
		Attempts   int    `json:"attempts"`
		DurationMS *int64 `json:"durationMs"`
	} `json:"steps"`
	Links struct {
		Output *string `json:"output"`
	} `json:"links"`
	Languages *consoleapi.Languages `json:"languages"`
}

// familyOf is what database mode reads of a task's languages: nil for a
// task of one language.
func familyOf(l *consoleapi.Languages) *languagesView {
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
			printLanguages(out, &taskView{Languages: familyOf(t.Languages)})
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

func (c *consoleClient) listCmd() *cobra.Command {
	o := &listOptions{maxLimit: 200}
	cmd := &cobra.Command{
		Use:   "list [--status S] [--limit N] [--json]",
		Short: "List recent tasks, newest first (through the console)",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.check(); err != nil {
				return err
			}
			q := url.Values{"status": {o.status}, "limit": {fmt.Sprint(o.limit)}}
			var page struct {
				Tasks []consoleapi.TaskSummary `json:"tasks"`
			}
			if err := c.do(cmd.Context(), http.MethodGet, "/api/tasks?"+q.Encode(), "", nil, &page); err != nil {
				return err
			}
			if o.asJSON {
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
	o.bind(cmd)
	return cmd
}
