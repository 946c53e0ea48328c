package review

import (
	"context"
	"errors"
	"fmt"

	"github.com/dubflow/dubflow/pkg/dub"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// reviewEditOptions are the flags of `dubctl review edit`.
type reviewEditOptions struct {
	edit                  dub.LineEdit
	source, text, speaker string
	startMS, endMS        int
	split                 int
	merge, delete, asJSON bool
	changed               func(name string) bool
}

// lineEdit is the edit the flags ask for, checked for what every door
// refuses anyway (one action at a time, a line numbered from 1).
func (o *reviewEditOptions) lineEdit() (dub.LineEdit, error) {
	e := o.edit
	if e.Line < 1 {
		return e, cli.UsageError(fmt.Errorf("--line %d: lines are numbered from 1 (see dubctl review show)", e.Line))
	}
	actions := 0
	for _, a := range []struct {
		on   bool
		name string
	}{{o.split != 0, dub.ActionSplit}, {o.merge, dub.ActionMerge}, {o.delete, dub.ActionDelete}} {
		if a.on {
			e.Action, actions = a.name, actions+1
		}
	}
	e.Word = o.split
	if o.changed("source") {
		e.Source = &o.source
	}
	if o.changed("text") {
		e.Text = &o.text
	}
	if o.changed("speaker") {
		e.Speaker = &o.speaker
	}
	if o.changed("start-ms") {
		e.StartMS = &o.startMS
	}
	if o.changed("end-ms") {
		e.EndMS = &o.endMS
	}
	if e.Change != (dub.Change{}) && actions == 0 {
		e.Action = dub.ActionEdit
		actions++
	}
	if actions != 1 {
		return e, cli.UsageError(errors.New("give one change: --source, --text, --start-ms, --end-ms, --speaker (together), or --split-at, --merge or --delete"))
	}
	return e, nil
}

// reviewEditCmd builds `dubctl review edit`.
func (rm room) reviewEditCmd() *cobra.Command {
	var o reviewEditOptions
	cmd := &cobra.Command{
		Use:   "edit TASK_ID --line N (--source S | --text T | --start-ms MS | --end-ms MS | --speaker S | --split-at WORD | --merge | --delete)",
		Short: "Change a line of a task waiting in review",
		Long: `edit changes line N (as "dubctl review show" numbers them) of a task waiting in
review: its source text (the line is translated again on approval unless
--text gives its translation too), its translation (--text "" leaves it to be
made on approval), its start and end in milliseconds, its speaker; or splits it
into two before word WORD (numbered from 1), merges it with the next line, or
deletes it. It prints the edit and the lines after it (--json: the API's
answer).`,
		Args: cli.ExactArgs(1),
	}
	o.changed = func(name string) bool { return cmd.Flags().Changed(name) }
	cmd.RunE = cli.TaskRun(rm.open, func() error { _, err := o.lineEdit(); return err },
		func(ctx context.Context, cmd *cobra.Command, b Backend, id uuid.UUID) error {
			e, _ := o.lineEdit()
			ed, err := b.EditReview(ctx, id, e)
			if err != nil {
				return err
			}
			if o.asJSON {
				return cli.WriteJSON(cmd.OutOrStdout(), ed)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "task %s: %s\n", id, view.EditText(ed.Edit))
			return printLines(cmd.OutOrStdout(), ed.Lines)
		})
	f := cmd.Flags()
	f.IntVar(&o.edit.Line, "line", 0, "the line, numbered from 1 (required)")
	f.StringVar(&o.source, "source", "", "its new source text")
	f.StringVar(&o.text, "text", "", "its new translation (empty: made on approval)")
	f.IntVar(&o.startMS, "start-ms", 0, "its new start, in milliseconds")
	f.IntVar(&o.endMS, "end-ms", 0, "its new end, in milliseconds")
	f.StringVar(&o.speaker, "speaker", "", "who says it (empty: not known)")
	f.IntVar(&o.split, "split-at", 0, "split it before this word (numbered from 1)")
	f.BoolVar(&o.merge, "merge", false, "merge it with the next line")
	f.BoolVar(&o.delete, "delete", false, "delete it")
	f.BoolVar(&o.asJSON, "json", false, "print the edit and the lines as JSON")
	_ = cmd.MarkFlagRequired("line")
	return cmd
}
