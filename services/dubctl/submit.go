package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// submitOptions are the flags of `dubctl submit`.
type submitOptions struct {
	input      string
	source     string
	target     string
	speaker    string
	glossary   string
	noValidate bool
	wait       bool
	waitOpts   waitOptions
}

// submission is a checked submit: what either mode sends.
type submission struct {
	input, source, speaker string
	// targets are the languages (none: the mode's default).
	targets []string
	// glossary holds the --glossary file's terms, glossaryText its text.
	glossary     []wire.Term
	glossaryText string
}

// submitCmd builds `dubctl submit`.
func submitCmd() *cobra.Command {
	var o submitOptions
	cmd := &cobra.Command{
		Use:   "submit --input FILE [--source en] [--target es] [--speaker S] [--wait]",
		Short: "Upload a video and start dubbing it",
		Long: `submit checks the video locally with ffprobe (it must be media with an audio
and a video stream), uploads it to videos/{task_id}/source.mp4, creates the
task and publishes task.extract_audio (the task row and the message commit
together through the outbox) — or, through the console, uploads it to the
console, which does the same. It prints the task id, or with --json the task.
With --wait it then follows the task like "dubctl wait".`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := o.check(cmd.Context())
			if err != nil {
				return err
			}
			return withBackend(cmd, func(ctx context.Context, b backend) error {
				id, err := b.Submit(ctx, s)
				if err != nil {
					return err
				}
				return reportStarted(cmd, b, id, o.wait, o.waitOpts, func() error {
					fmt.Fprintln(cmd.OutOrStdout(), id)
					return nil
				})
			})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.input, "input", "i", "", "video file to dub (required)")
	f.StringVar(&o.source, "source", "", "language spoken in the video (default DEFAULT_SOURCE_LANGUAGE, or the console's)")
	f.StringVar(&o.target, "target", "", "language to dub into (default DEFAULT_TARGET_LANGUAGE, or the console's); several separated by commas (es,ca): transcribed once, one child task per language")
	f.StringVar(&o.speaker, "speaker", "", "voice of the dub (the synthesis engine's default when empty)")
	f.StringVar(&o.glossary, "glossary", "", "CSV file of terms the translation keeps to: source,target (empty target: keep the term)")
	f.BoolVar(&o.noValidate, "no-validate", false, "upload without the local ffprobe check (the workers still check)")
	f.BoolVar(&o.wait, "wait", false, "follow the task until it ends")
	o.waitOpts.register(cmd)
	_ = cmd.MarkFlagRequired("input")
	return cmd
}

// check is every check of a submission before anything is uploaded or
// created, in both modes: the flags, the output path, the languages, the
// glossary and the video itself.
func (o *submitOptions) check(ctx context.Context) (submission, error) {
	s := submission{input: o.input, source: o.source, speaker: o.speaker}
	if err := o.waitOpts.check(); err != nil {
		return s, err
	}
	if o.target != "" {
		var err error
		if s.targets, err = parseTargets(o.target); err != nil {
			return s, err
		}
	}
	if err := checkOutput(o.input, o.waitOpts.output, s.targets); err != nil {
		return s, err
	}
	var err error
	if s.glossary, s.glossaryText, err = readGlossary(o.glossary); err != nil {
		return s, err
	}
	return s, checkInput(ctx, o.input, !o.noValidate)
}

// checkOutput refuses an --output that would overwrite the input (for a
// task of several languages, any language's file).
func checkOutput(input, output string, targets []string) error {
	if output == "" {
		return nil
	}
	outs := []string{output}
	if len(targets) > 1 {
		for _, l := range targets {
			outs = append(outs, languageOutput(output, uuid.Nil, l))
		}
	}
	in, _ := filepath.Abs(input)
	inInfo, inErr := os.Stat(input)
	for _, o := range outs {
		abs, _ := filepath.Abs(o)
		same := abs == in
		if oi, err := os.Stat(o); err == nil && inErr == nil && os.SameFile(inInfo, oi) {
			same = true
		}
		if same {
			return usageError(fmt.Errorf("--output %s is the input: the dub would overwrite the video it is made from", o))
		}
	}
	return nil
}

// checkInput makes sure path is a readable file and, when probe is set, a
// video with an audio stream.
func checkInput(ctx context.Context, path string, probe bool) error {
	fi, err := os.Stat(path)
	if err != nil {
		return usageError(fmt.Errorf("input: %w", err))
	}
	if !fi.Mode().IsRegular() {
		return usageError(fmt.Errorf("input %s: not a regular file", path))
	}
	if !probe {
		return nil
	}
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := media.ProbeInput(pctx, path, media.Limits{RequireAudio: true, RequireVideo: true}); err != nil {
		return fmt.Errorf("check input: %w", err)
	}
	return nil
}

// reportStarted follows a task just started (--wait), prints it (--json)
// or prints what brief says.
func reportStarted(cmd *cobra.Command, b backend, id uuid.UUID, wait bool, o waitOptions, brief func() error) error {
	if wait {
		return follow(cmd, b, id, o)
	}
	if o.json {
		t, err := b.Task(cmd.Context(), id)
		if err != nil {
			return err
		}
		return writeJSON(cmd.OutOrStdout(), t)
	}
	return brief()
}
