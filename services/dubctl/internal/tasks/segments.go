package tasks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// segmentsCmd builds `dubctl segments`.
func (rm room) segmentsCmd() *cobra.Command {
	return cli.ShowCmd(&cobra.Command{
		Use:   "segments TASK_ID [--json]",
		Short: "List a task's lines: times, speaker, voice, source text, translation, fit",
		Long: `segments lists the task's segments numbered from 1 (the number redub takes),
with their start and end in the video, the speaker and voice, what was said,
the translation that is spoken, and what synthesis recorded about the fit of
the clip in its slot.`,
	}, rm.open, "print a JSON array", cli.ParseTaskID, func(ctx context.Context, b Backend, id uuid.UUID) ([]view.Segment, error) {
		return b.Segments(ctx, id)
	}, printSegments)
}

// printSegments writes the segments as a table.
func printSegments(w io.Writer, segs []view.Segment) error {
	t := cli.NewTable(w, "N", "START", "END", "SPEAKER", "VOICE", "SOURCE", "TEXT", "FIT")
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
		t.Row(s.N, cli.Clock(s.StartMS), cli.Clock(s.EndMS), cli.OrDash(s.Speaker), cli.OrDash(s.Voice), cli.OneLineText(s.SourceText),
			cli.OneLineText(text), fit)
	}
	return t.Flush()
}

// redubOptions are the flags of `dubctl redub`.
type redubOptions struct {
	segment  int
	text     string
	wait     bool
	waitOpts cli.WaitOptions
}

// check refuses what redub would refuse anyway, before anything is sent.
func (o *redubOptions) check() error {
	if o.segment < 1 {
		return cli.UsageError(fmt.Errorf("--segment %d: segments are numbered from 1 (see dubctl segments)", o.segment))
	}
	if strings.TrimSpace(o.text) == "" {
		return cli.UsageError(errors.New("--text is empty: give the line's new translation"))
	}
	return o.waitOpts.Check()
}

// redubCmd builds `dubctl redub`.
func (rm room) redubCmd() *cobra.Command {
	var o redubOptions
	cmd := &cobra.Command{
		Use:   "redub TASK_ID --segment N --text TEXT [--wait [--output FILE]]",
		Short: "Change one line's translation and dub only that line again",
		Long: `redub sets the translation of segment N (as "dubctl segments" numbers them) of
a done task, re-synthesizes that segment only and muxes the video again. The
result is a new output version (outputs/{task_id}/v<n>/final.mp4); earlier
versions stay where they were ("dubctl versions" lists them). The step
attempts show one new tts attempt and one new mux_video attempt, of the part v<n>.
A task that is not done is refused, and so is a parent task of several
languages: re-dub the line in the child of its language. With --wait it
follows the task like "dubctl wait" and downloads the new version.`,
		Args: cli.ExactArgs(1),
		RunE: cli.TaskRun(rm.open, o.check, func(ctx context.Context, cmd *cobra.Command, b Backend, id uuid.UUID) error {
			r, err := b.Redub(ctx, id, o.segment, o.text)
			if err != nil {
				return err
			}
			switch {
			case o.wait:
				return rm.follow(cmd, b, id, o.waitOpts)
			case o.waitOpts.JSON:
				return cli.WriteJSON(cmd.OutOrStdout(), r)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "task %s: segment %d re-dubbing as version %d → %s\n", id, r.N, r.Version, r.OutputVideoKey)
			return nil
		}),
	}
	f := cmd.Flags()
	f.IntVar(&o.segment, "segment", 0, "the segment to change, numbered from 1 (required)")
	f.StringVar(&o.text, "text", "", "its new translation (required, not empty)")
	f.BoolVar(&o.wait, "wait", false, "follow the task until the new version is done")
	o.waitOpts.Register(cmd)
	_ = cmd.MarkFlagRequired("segment")
	_ = cmd.MarkFlagRequired("text")
	return cmd
}

// versionsCmd builds `dubctl versions`.
func (rm room) versionsCmd() *cobra.Command {
	return cli.ShowCmd(&cobra.Command{
		Use:   "versions TASK_ID [--json]",
		Short: "List a task's output versions (the first dub and each re-dub)",
	}, rm.open, "print a JSON array", cli.ParseTaskID, func(ctx context.Context, b Backend, id uuid.UUID) ([]view.Version, error) {
		return b.Versions(ctx, id)
	}, printVersions)
}

// printVersions writes the versions as a table.
func printVersions(w io.Writer, vs []view.Version) error {
	t := cli.NewTable(w, "VERSION", "READY", "OUTPUT", "CHANGE")
	for _, v := range vs {
		change := "first dub"
		if v.Segment != nil && v.Text != nil {
			change = fmt.Sprintf("segment %d: %s", *v.Segment, cli.OneLineText(*v.Text))
		}
		output := v.OutputVideoKey
		if v.BurnedVideoKey != "" {
			output += " + " + path.Base(v.BurnedVideoKey) // subtitles burned in
		}
		t.Row(v.Version, v.Ready, output, change)
	}
	return t.Flush()
}
