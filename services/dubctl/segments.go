package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/dubflow/dubflow/pkg/dub"
	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"
)

// segmentsCmd builds `dubctl segments`.
func segmentsCmd() *cobra.Command {
	return showCmd(&cobra.Command{
		Use:   "segments TASK_ID [--json]",
		Short: "List a task's lines: times, speaker, voice, source text, translation, fit",
		Long: `segments lists the task's segments numbered from 1 (the number redub takes),
with their start and end in the video, the speaker and voice, what was said,
the translation that is spoken, and what synthesis recorded about the fit of
the clip in its slot.`,
	}, "print a JSON array", parseTaskID, func(ctx context.Context, pool *pgxpool.Pool, id uuid.UUID) ([]dub.Segment, error) {
		return dub.Segments(ctx, pool, id)
	}, printSegments)
}

// printSegments writes the segments as a table.
func printSegments(w io.Writer, segs []dub.Segment) error {
	t := newTable(w, "N", "START", "END", "SPEAKER", "VOICE", "SOURCE", "TEXT", "FIT")
	for _, s := range segs {
		text := "(not translated)"
		if s.Text != nil {
			text = *s.Text
		}
		fit := string(s.Fit)
		switch {
		case s.Error != "":
			fit = "error: " + s.Error
		case !s.Synthesized:
			fit = "(no audio yet)"
		}
		t.row(s.N, clock(s.StartMS), clock(s.EndMS), orDash(s.Speaker), orDash(s.Voice), oneLineText(s.SourceText),
			oneLineText(text), fit)
	}
	return t.flush()
}

// redubOptions are the flags of `dubctl redub`.
type redubOptions struct {
	segment  int
	text     string
	wait     bool
	waitOpts waitOptions
}

// redubCmd builds `dubctl redub`.
func redubCmd() *cobra.Command {
	var o redubOptions
	cmd := &cobra.Command{
		Use:   "redub TASK_ID --segment N --text TEXT [--wait [--output FILE]]",
		Short: "Change one line's translation and dub only that line again",
		Long: `redub sets the translation of segment N (as "dubctl segments" numbers them) of
a done task, re-synthesizes that segment only and muxes the video again. The
result is a new output version (outputs/{task_id}/v<n>/final.mp4); earlier
versions stay where they were ("dubctl versions" lists them). task_steps
shows one new tts attempt and one new mux_video attempt, of the part v<n>.
A task that is not done is refused. With --wait it follows the task like
"dubctl wait" and downloads the new version.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRedub(cmd, args[0], o)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.segment, "segment", 0, "the segment to change, numbered from 1 (required)")
	f.StringVar(&o.text, "text", "", "its new translation (required; empty makes the line silent)")
	f.BoolVar(&o.wait, "wait", false, "follow the task until the new version is done")
	o.waitOpts.register(cmd)
	_ = cmd.MarkFlagRequired("segment")
	_ = cmd.MarkFlagRequired("text")
	return cmd
}

func runRedub(cmd *cobra.Command, arg string, o redubOptions) error {
	ctx := cmd.Context()
	id, err := parseTaskID(arg)
	if err != nil {
		return err
	}
	if err := o.waitOpts.check(); err != nil {
		return err
	}
	c, err := newClients()
	if err != nil {
		return err
	}
	defer c.close()
	pool, err := c.db(ctx)
	if err != nil {
		return err
	}
	pub, err := c.publisher(ctx)
	if err != nil {
		return err
	}
	r, err := dub.Redub(ctx, pool, id, o.segment, o.text)
	if errors.Is(err, dub.ErrNoSegment) || errors.Is(err, dub.ErrInvalidText) {
		return usageError(err)
	}
	if err != nil {
		return err
	}
	if err := outbox.Flush(ctx, pool, pub, r.Outbox); err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "dubctl: warning: publish deferred to the outbox sweep: %v\n", err)
	}
	if o.wait {
		return followTask(cmd, c, id, o.waitOpts)
	}
	if o.waitOpts.json {
		return writeJSON(cmd.OutOrStdout(), r)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "task %s: segment %d re-dubbing as version %d → %s\n", id, r.N, r.Version, r.OutputVideoKey)
	return nil
}

// versionsCmd builds `dubctl versions`.
func versionsCmd() *cobra.Command {
	return showCmd(&cobra.Command{
		Use:   "versions TASK_ID [--json]",
		Short: "List a task's output versions (the first dub and each re-dub)",
	}, "print a JSON array", parseTaskID, func(ctx context.Context, pool *pgxpool.Pool, id uuid.UUID) ([]dub.Version, error) {
		return dub.Versions(ctx, pool, id)
	}, printVersions)
}

// printVersions writes the versions as a table.
func printVersions(w io.Writer, vs []dub.Version) error {
	t := newTable(w, "VERSION", "READY", "OUTPUT", "CHANGE")
	for _, v := range vs {
		change := "first dub"
		if v.SegmentIdx != nil && v.Text != nil {
			change = fmt.Sprintf("segment idx %d: %s", *v.SegmentIdx, oneLineText(*v.Text))
		}
		t.row(v.Version, v.Ready, v.OutputVideoKey, change)
	}
	return t.flush()
}

// clock formats milliseconds as m:ss.mmm.
func clock(ms int) string {
	return fmt.Sprintf("%d:%02d.%03d", ms/60000, ms/1000%60, ms%1000)
}

// oneLineText keeps a text on one table line.
func oneLineText(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// readGlossary reads the --glossary file ("" for none).
func readGlossary(path string) ([]wire.Term, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, usageError(fmt.Errorf("glossary: %w", err))
	}
	defer f.Close()
	terms, err := dub.ParseGlossaryCSV(f)
	if err != nil {
		return nil, usageError(fmt.Errorf("glossary %s: %w", path, err))
	}
	return terms, nil
}
