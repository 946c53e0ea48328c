package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/dubflow/dubflow/pkg/view"
	"github.com/google/uuid"
)

// This file is dubctl's side of a task that dubs into several languages
// at once: `submit --target es,ca`, the children in `status`, and the
// outputs `wait` downloads, one per language.

// printLanguages writes a parent's languages and children, or a child's
// parent.
func printLanguages(w io.Writer, t *view.Task) {
	f := t.Languages
	if f == nil {
		return
	}
	if f.ParentTaskID != nil {
		fmt.Fprintf(w, "parent    %s (one of its languages; extract_audio and asr ran there)\n", *f.ParentTaskID)
		return
	}
	fmt.Fprintf(w, "targets   %s (transcribed once, one child task per language)\n", strings.Join(f.TargetLanguages, ", "))
	if len(f.Children) == 0 {
		fmt.Fprintln(w, "children  none yet: they start where the transcription ends")
		return
	}
	fmt.Fprintln(w, "\nchildren")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  LANGUAGE\tTASK\tSTATUS\tOUTPUT\tERROR")
	for _, c := range f.Children {
		output := c.OutputVideoKey
		if c.Status != view.Done {
			output = "-"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", c.TargetLanguage, c.TaskID, c.Status, output, c.Error)
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
