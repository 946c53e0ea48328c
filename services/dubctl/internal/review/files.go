package review

import (
	"context"
	"fmt"
	"os"
	"unicode/utf8"

	"github.com/dubflow/dubflow/pkg/dub"
	"github.com/dubflow/dubflow/pkg/subtitle"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// reviewExportCmd builds `dubctl review export`.
func (rm room) reviewExportCmd() *cobra.Command {
	var format, text, output string
	cmd := &cobra.Command{
		Use:   "export TASK_ID [--format srt|vtt] [--text source|target] [--output FILE]",
		Short: "Write a task's lines as a subtitle file, to edit elsewhere and import back",
		Long: `export writes the task's lines as SRT (or WebVTT with --format vtt), one cue a
line with its times and speaker: their source text, or with --text target their
translation (by default the translation while the task waits in review of its
translation, else the source). It writes to standard output, or to --output.`,
		Args: cli.ExactArgs(1),
	}
	check := func() error {
		if format != string(subtitle.SRT) && format != string(subtitle.WebVTT) {
			return cli.UsageError(fmt.Errorf("--format %q: want srt or vtt", format))
		}
		return checkText(text, true)
	}
	cmd.RunE = cli.TaskRun(rm.open, check, func(ctx context.Context, cmd *cobra.Command, b Backend, id uuid.UUID) error {
		file, err := b.ExportLines(ctx, id, subtitle.Format(format), text)
		if err != nil {
			return err
		}
		if output == "" {
			_, err = cli.RawWriter(cmd.OutOrStdout()).Write(file)
			return err
		}
		return os.WriteFile(output, file, 0o644)
	})
	f := cmd.Flags()
	f.StringVar(&format, "format", "srt", "srt or vtt")
	f.StringVar(&text, "text", "", "source or target (default: the text under review)")
	f.StringVarP(&output, "output", "o", "", "write the file here instead of to standard output")
	return cmd
}

// checkText checks a --text value: source or target ("" too when empty
// is allowed).
func checkText(text string, empty bool) error {
	if text == dub.TextSource || text == dub.TextTarget || (empty && text == "") {
		return nil
	}
	return cli.UsageError(fmt.Errorf("--text %q: want source or target", text))
}

// reviewImportCmd builds `dubctl review import`.
func (rm room) reviewImportCmd() *cobra.Command {
	var file, text string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "import TASK_ID --file FILE [--text source|target] [--json]",
		Short: "Replace a task's lines in review with an edited subtitle file",
		Long: `import reads an SRT or WebVTT file (as export wrote it, edited elsewhere) and
replaces the lines of a task waiting in review with its cues: with --text
source (the default) their times, speakers and source texts (a line keeps its
translation where the file keeps its text unchanged; the others are translated
on approval), with --text target their translations, line for line. The file is
checked as a task's own subtitle file is: a refusal names the file's line.`,
		Args: cli.ExactArgs(1),
	}
	cmd.RunE = cli.TaskRun(rm.open, func() error { return checkText(text, false) },
		func(ctx context.Context, cmd *cobra.Command, b Backend, id uuid.UUID) error {
			data, err := readSubtitles(file)
			if err != nil {
				return err
			}
			ed, err := b.ImportLines(ctx, id, text, data)
			if err != nil {
				return err
			}
			if asJSON {
				return cli.WriteJSON(cmd.OutOrStdout(), ed)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "task %s: %s\n", id, view.EditText(ed.Edit))
			return printLines(cmd.OutOrStdout(), ed.Lines)
		})
	f := cmd.Flags()
	f.StringVar(&file, "file", "", "the subtitle file (required)")
	f.StringVar(&text, "text", dub.TextSource, "which text the file holds: source or target")
	f.BoolVar(&asJSON, "json", false, "print the import and the lines as JSON")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}

// maxImportBytes bounds a subtitle file import reads (the console reads a
// JSON body of at most 1 MiB).
const maxImportBytes = 1 << 20

// readSubtitles reads a subtitle file, refusing in both modes alike what
// cannot be sent: a file over maxImportBytes, a file that is not UTF-8
// text (the reader's own refusal, naming its line).
func readSubtitles(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, cli.UsageError(fmt.Errorf("--file: %w", err))
	}
	if len(data) > maxImportBytes-4096 {
		return nil, cli.UsageError(fmt.Errorf("--file %s: %d bytes, at most %d", path, len(data), maxImportBytes-4096))
	}
	if _, err := subtitle.Parse(data, subtitle.Limits{}); err != nil && !utf8.Valid(data) {
		return nil, cli.UsageError(fmt.Errorf("%w: subtitles: %v", dub.ErrInvalidLine, err))
	}
	return data, nil
}
