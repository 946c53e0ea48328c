package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// This file is dubctl's side of a task that dubs into several languages
// at once: `submit --target es,ca`, the children in `status`, and the
// outputs `wait` downloads, one per language.

// languagesView is the "languages" object of status --json: a parent's
// languages and child tasks, or a child's parent.
type languagesView = task.Family

// parseTargets reads --target: one language or several separated by commas,
// each once, at most wire.MaxTargetLanguages.
func parseTargets(s string) ([]string, error) {
	var out []string
	for _, l := range strings.Split(s, ",") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		for _, seen := range out {
			if seen == l {
				return nil, usageError(fmt.Errorf("--target names %q twice", l))
			}
		}
		out = append(out, l)
	}
	switch {
	case len(out) == 0:
		return nil, usageError(errors.New("--target names no language"))
	case len(out) > wire.MaxTargetLanguages:
		return nil, usageError(fmt.Errorf("--target names %d languages, at most %d", len(out), wire.MaxTargetLanguages))
	}
	return out, nil
}

// loadLanguages reads a task's family: nil for a task of one language.
func loadLanguages(ctx context.Context, q task.RowQuerier, id uuid.UUID) (*languagesView, error) {
	f, err := task.FamilyOf(ctx, q, id)
	if err != nil {
		return nil, err
	}
	if f.ParentID == uuid.Nil && len(f.Targets) == 0 {
		return nil, nil
	}
	return &f, nil
}

// isParent reports whether the view is a parent's.
func isParent(f *languagesView) bool { return f != nil && len(f.Targets) > 0 }

// printLanguages writes a parent's languages and children, or a child's
// parent.
func printLanguages(w io.Writer, v *taskView) {
	f := v.Languages
	if f == nil {
		return
	}
	if f.ParentID != uuid.Nil {
		fmt.Fprintf(w, "parent    %s (one of its languages; extract_audio and asr ran there)\n", f.ParentID)
		return
	}
	fmt.Fprintf(w, "targets   %s (transcribed once, one child task per language)\n", strings.Join(f.Targets, ", "))
	if len(f.Children) == 0 {
		fmt.Fprintln(w, "children  none yet: they start where the transcription ends")
		return
	}
	fmt.Fprintln(w, "\nchildren")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  LANGUAGE\tTASK\tSTATUS\tOUTPUT\tERROR")
	for _, c := range f.Children {
		output := c.OutputVideoKey
		if c.Status != taskDone {
			output = "-"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", c.TargetLanguage, c.ID, c.Status, output, c.Error)
	}
	_ = tw.Flush()
}

// languageOutput is where wait saves one language's video: the --output
// file with the language before its extension, else <parent>.<language>.mp4.
func languageOutput(output string, parent uuid.UUID, language string) string {
	if output == "" {
		return parent.String() + "." + language + ".mp4"
	}
	ext := filepath.Ext(output)
	return strings.TrimSuffix(output, ext) + "." + language + ext
}

// finishLanguages downloads the video of each language of a parent that is
// done, with its subtitles, and prints where they are.
func finishLanguages(ctx context.Context, cmd *cobra.Command, c *clients, v *taskView, o waitOptions) error {
	objects, err := c.blob(ctx)
	if err != nil {
		return err
	}
	limit, err := outputLimit()
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	v.OutputPaths = map[string]string{}
	for _, child := range v.Languages.Children {
		dest := languageOutput(o.output, v.TaskID, child.TargetLanguage)
		if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
			return fmt.Errorf("save output: %w", err)
		}
		if err := objects.GetFile(ctx, child.OutputVideoKey, dest, limit); err != nil {
			if errors.Is(err, blob.ErrTooLarge) {
				return fmt.Errorf("%w (MAX_VIDEO_BYTES+MAX_AUDIO_BYTES)", err)
			}
			return err
		}
		v.OutputPaths[child.TargetLanguage] = dest
		cv := &taskView{TaskID: child.ID, SourceLanguage: v.SourceLanguage, TargetLanguage: child.TargetLanguage,
			OutputVideoKey: child.OutputVideoKey}
		subs, err := downloadSubtitles(ctx, objects, cv, dest)
		if err != nil {
			return err
		}
		v.SubtitlePaths = append(v.SubtitlePaths, subs...)
	}
	if o.json {
		return writeJSON(out, v)
	}
	fmt.Fprintf(out, "task %s done: %d segment(s) dubbed %s→%s\n", v.TaskID, v.Segments.Total,
		v.SourceLanguage, strings.Join(v.Languages.Targets, ","))
	for _, s := range v.SubtitlePaths {
		fmt.Fprintf(out, "subtitles: %s\n", s)
	}
	for _, l := range v.Languages.Targets {
		if p, ok := v.OutputPaths[l]; ok {
			fmt.Fprintln(out, p)
		}
	}
	return nil
}
