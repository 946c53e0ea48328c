package submitting

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/admit"
	"github.com/dubflow/dubflow/pkg/idempotency"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/dubflow/dubflow/services/dubctl/internal/shape"
	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// submitOptions are the flags of `dubctl submit`.
type submitOptions struct {
	input    string
	source   string
	target   string
	speaker  string
	glossary string
	review   string
	// subtitles is --subtitles FILE[:LANG]; sourceSubtitles the second
	// file of subtitles in the target language; burn --burn-subtitles.
	subtitles, sourceSubtitles, burn string
	noValidate                       bool
	wait                             bool
	waitOpts                         cli.WaitOptions
	// idempotencyKey makes the submission safe to send again
	// (--idempotency-key; pkg/idempotency).
	idempotencyKey string
	// project is --project.
	project string
}

// admitter gives the rules a submission is judged by before anything is
// uploaded: the default languages, what the engines announced (database
// mode; through the console, the console judges the engines) and the
// media limits.
type admitter interface {
	Rules(ctx context.Context) (admit.Rules, admit.Limits, error)
}

// submitLong is `dubctl submit`'s help.
const submitLong = `submit checks the video locally with ffprobe (it must be media with an audio
and a video stream), uploads it to videos/{task_id}/source.mp4, creates the
task and publishes task.extract_audio (the task row and the message commit
together through the outbox) — or, through the console, uploads it to the
console, which does the same. It prints the task id, or with --json the task.
With --wait it then follows the task like "dubctl wait".

With --subtitles FILE[:LANG] the task starts from a subtitle file (SRT or
WebVTT) instead of recognising the speech: in the source language (the
default LANG) its cues are the lines, translated as usual; in the target
language they are spoken as they are (--source-subtitles FILE gives their
source text for the bilingual subtitles). The file is checked here as the
console and extract_audio check it: a refusal names its line (exit 2).
--burn-subtitles target|bilingual also writes final.burned.mp4, the dub with
those subtitles drawn into the picture.

With --review the task stops in the status review after asr (transcript) or
after translate (translation) until its lines are approved ("dubctl review").`

// submitCmd builds `dubctl submit`.
func (rm room) submitCmd() *cobra.Command {
	var o submitOptions
	cmd := &cobra.Command{
		Use:   "submit --input FILE [--source en] [--target es] [--speaker S] [--subtitles FILE[:LANG]] [--review transcript,translation] [--wait]",
		Short: "Upload a video and start dubbing it",
		Long:  submitLong,
		Args:  cli.ExactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.waitOpts.Check(); err != nil {
				return err
			}
			return rm.open(cmd, func(ctx context.Context, b Backend) error {
				s, err := o.check(ctx, b)
				if err != nil {
					return err
				}
				id, err := b.Submit(ctx, s)
				if err != nil {
					return err
				}
				return rm.reportStarted(cmd, b, id, o.wait, o.waitOpts, func() error {
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
	f.StringVar(&o.review, "review", "", "stop for a person's edits of the lines before the voice is made: transcript (after asr), translation (after translate), or transcript,translation (see dubctl review)")
	f.StringVar(&o.subtitles, "subtitles", "", "start from this subtitle file (SRT or WebVTT) instead of recognising the speech: FILE, or FILE:LANG for a file in the target language (default the source)")
	f.StringVar(&o.sourceSubtitles, "source-subtitles", "", "with --subtitles in the target language: a second file with the source text of the same lines")
	f.StringVar(&o.burn, "burn-subtitles", "", "also write the dub with subtitles drawn in (final.burned.mp4): target or bilingual")
	f.BoolVar(&o.noValidate, "no-validate", false, "skip the local ffprobe check: only the file's size and container are checked here (the workers still check)")
	f.BoolVar(&o.wait, "wait", false, "follow the task until it ends")
	f.StringVar(&o.project, "project", "", "the project the task belongs to (default: the default project; a project's token: its own)")
	f.StringVar(&o.idempotencyKey, "idempotency-key", "", "a key of your choosing (1..255 visible ASCII characters) that makes the submit safe to run again: within 24 hours the same submission with it prints its first task and creates nothing; a different submission with it is refused")
	o.waitOpts.Register(cmd)
	_ = cmd.MarkFlagRequired("input")
	return cmd
}

// check is every check of a submission before anything is uploaded or
// created, in both modes, through pkg/admit (the console's and
// extract_audio's checks, with the same text): the languages, the speaker,
// the glossary and the video itself; then the output path.
func (o *submitOptions) check(ctx context.Context, a admitter) (shape.Submission, error) {
	s := shape.Submission{Input: o.input, IdempotencyKey: o.idempotencyKey, Project: o.project}
	if o.idempotencyKey != "" {
		if err := idempotency.CheckKey(o.idempotencyKey); err != nil {
			return s, cli.UsageError(err)
		}
	}
	if err := checkFile(o.input); err != nil {
		return s, err
	}
	rules, limits, err := a.Rules(ctx)
	if err != nil {
		return s, err
	}
	s.Req = admit.Request{Source: o.source, Speaker: o.speaker, FileName: o.input}
	if o.target != "" {
		s.Req.Targets = []string{o.target}
	}
	if o.review != "" {
		s.Req.Review = []string{o.review}
	}
	if s.Req.Glossary, err = admit.GlossaryFile(o.glossary); err != nil {
		return s, refused(err)
	}
	if err := o.readSubtitles(&s.Req); err != nil {
		return s, refused(err)
	}
	if s.Task, err = admit.Check(s.Req, rules); err != nil {
		return s, refused(err)
	}
	if err := checkOutput(o.input, o.waitOpts.Output, s.Task.Targets); err != nil {
		return s, err
	}
	if o.noValidate {
		// No ffprobe; what needs none still refuses garbage, in both modes.
		return s, refused(limits.File(o.input))
	}
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	info, err := limits.Media(pctx, o.input)
	if err != nil {
		return s, refused(err)
	}
	if err := s.Task.FitVideo(info.Duration); err != nil {
		return s, refused(err)
	}
	s.Probe = admit.ProbeRecord(o.input, info)
	return s, nil
}

// subtitlesLanguage reads --subtitles FILE[:LANG]: a suffix after the last
// colon that reads as a language code is the file's language.
var subtitlesLanguage = regexp.MustCompile(`:([a-z]{2,3}(?:-[A-Za-z0-9]{2,8})*)$`)

// readSubtitles reads the subtitle files of --subtitles and
// --source-subtitles into req (as pkg/admit reads a file: an empty one is
// refused, not taken for none), and --burn-subtitles.
func (o *submitOptions) readSubtitles(req *admit.Request) error {
	file := o.subtitles
	if m := subtitlesLanguage.FindStringSubmatch(file); m != nil {
		file, req.SubtitlesLanguage = strings.TrimSuffix(file, m[0]), m[1]
	}
	var err error
	if req.Subtitles, err = admit.SubtitlesFile(admit.FieldSubtitles, file); err != nil {
		return err
	}
	if req.SourceSubtitles, err = admit.SubtitlesFile(admit.FieldSourceSubtitles, o.sourceSubtitles); err != nil {
		return err
	}
	req.BurnSubtitles = o.burn
	return nil
}

// probeTimeout bounds the local ffprobe check of --input.
const probeTimeout = time.Minute

// refused gives a refusal of pkg/admit its exit code: a usage error (2)
// for a request that is wrong or over a limit, 1 for one that could not be
// judged now.
func refused(err error) error {
	if e, ok := admit.As(err); ok && e.Kind != admit.Unavailable {
		return cli.UsageError(err)
	}
	return err
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
			outs = append(outs, cli.LanguageOutput(output, uuid.Nil, l))
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
			return cli.UsageError(fmt.Errorf("--output %s is the input: the dub would overwrite the video it is made from", o))
		}
	}
	return nil
}

// checkFile makes sure path is a regular file.
func checkFile(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return cli.UsageError(fmt.Errorf("input: %w", err))
	}
	if !fi.Mode().IsRegular() {
		return cli.UsageError(fmt.Errorf("input %s: not a regular file", path))
	}
	return nil
}

// reportStarted follows a task just started (--wait), prints it (--json)
// or prints what brief says.
func (rm room) reportStarted(cmd *cobra.Command, b Backend, id uuid.UUID, wait bool, o cli.WaitOptions, brief func() error) error {
	if wait {
		return rm.follow(cmd, b, id, o)
	}
	if o.JSON {
		t, err := b.Task(cmd.Context(), id)
		if err != nil {
			return err
		}
		return cli.WriteJSON(cmd.OutOrStdout(), t)
	}
	return brief()
}
