package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/schollz/progressbar/v3"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// pollInterval is how often wait reads the task at the least; in database
// mode a change of its status wakes it at once (task.Listener).
const pollInterval = 500 * time.Millisecond

// waitOptions are the flags wait shares with submit --wait and redub
// --wait.
type waitOptions struct {
	output  string
	timeout time.Duration
	json    bool
}

// register adds the flags to cmd.
func (o *waitOptions) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVarP(&o.output, "output", "o", "", "where to save the dubbed video (default ./<task_id>.mp4); SRTs go next to it")
	f.DurationVar(&o.timeout, "timeout", 30*time.Minute, "give up waiting after this long (exit code 3)")
	f.BoolVar(&o.json, "json", false, "print the task as JSON instead of text, without progress")
}

func (o *waitOptions) check() error {
	if o.timeout <= 0 {
		return usageError(fmt.Errorf("--timeout %s: want more than 0", o.timeout))
	}
	return nil
}

// waitCmd builds `dubctl wait`.
func waitCmd() *cobra.Command {
	var o waitOptions
	cmd := &cobra.Command{
		Use:   "wait TASK_ID [--output FILE] [--timeout D] [--json]",
		Short: "Follow a task until it ends and download the result",
		Long: `wait shows the task's progress (units of work done: the parts of its steps;
segments translated and synthesized) on stderr until it ends. When the task is
done it downloads the dubbed video to --output and the subtitles next to
it, SRT and WebVTT, and — when the task asked for subtitles burned in — the
dub with them drawn into the picture as <output>.burned.mp4 (a task of
several languages: one video per language). A failed or cancelled
task prints its error and exits 1; a compensating task (speech synthesis of
some segments still fails) says how to re-drive it and exits 4; a timeout
exits 3.`,
		Args: exactArgs(1),
		RunE: taskRun(o.check, func(_ context.Context, cmd *cobra.Command, b backend, id uuid.UUID) error {
			return follow(cmd, b, id, o)
		}),
	}
	o.register(cmd)
	return cmd
}

// waited is what wait prints as JSON: the task (the console's shape) and
// the local files it saved.
type waited struct {
	*view.Task
	// OutputPath is the video saved (a task of one language),
	// OutputPaths the video of each language (a parent); SubtitlePaths
	// are the SRT and WebVTT files saved, BurnedPaths the videos with
	// subtitles drawn in.
	OutputPath    string            `json:"outputPath,omitempty"`
	OutputPaths   map[string]string `json:"outputPaths,omitempty"`
	SubtitlePaths []string          `json:"subtitlePaths"`
	BurnedPaths   []string          `json:"burnedPaths,omitempty"`
}

// follow reads the task until it ends or o.timeout passes (reading again
// whenever b says it may have changed), shows its progress, and reports
// the outcome: a done task's outputs are downloaded.
func follow(cmd *cobra.Command, b backend, id uuid.UUID, o waitOptions) error {
	ctx := cmd.Context()
	var shown progressLine
	if !o.json {
		shown = newProgressLine(cmd.ErrOrStderr(), isTerminal(cmd.ErrOrStderr()))
	}
	defer shown.end()
	deadline := time.Now().Add(o.timeout)
	for {
		t, err := b.Task(ctx, id)
		if err != nil {
			return err
		}
		shown.show(t)
		switch {
		case t.Status == view.Done:
			shown.end()
			return finishDone(cmd, b, t, o)
		case t.Status == view.Cancelled:
			return report(cmd.OutOrStdout(), t, o, withCode(exitFailed, fmt.Errorf("task %s was %s", id, t.Error)))
		case view.Ended(t.Status):
			return report(cmd.OutOrStdout(), t, o, withCode(exitFailed, fmt.Errorf("task %s %s: %s", id, t.Status, t.Error)))
		case t.Status == view.Review:
			return report(cmd.OutOrStdout(), t, o, withCode(exitReview, fmt.Errorf(
				"task %s waits in review of its %s: read and edit its lines with `dubctl review show %s`, then `dubctl review approve %s`",
				id, t.ReviewStage, id, id)))
		case t.Status == view.Compensating:
			return report(cmd.OutOrStdout(), t, o, withCode(exitCompensated, fmt.Errorf(
				"task %s is compensating: speech synthesis failed for %d segment(s) after all retries; "+
					"fix the cause, then re-drive it with `tts_requeue -limit 100` (see `dubctl status %s`)",
				id, t.Segments.FailedTTS, id)))
		}
		left := time.Until(deadline)
		if left <= 0 {
			return report(cmd.OutOrStdout(), t, o, withCode(exitTimeout, fmt.Errorf(
				"task %s still %s after %s (at step %s); `dubctl wait %s` continues", id, t.Status, o.timeout,
				t.CurrentStep(), id)))
		}
		if err := b.Changed(ctx, id, min(pollInterval, left)); err != nil {
			return fmt.Errorf("wait for %s: %w", id, err)
		}
	}
}

// report prints the task as JSON (and exits with err's code quietly) or
// returns err for dubctl to print.
func report(out io.Writer, t *view.Task, o waitOptions, err error) error {
	if !o.json {
		return err
	}
	if werr := writeJSON(out, waited{Task: t, SubtitlePaths: []string{}}); werr != nil {
		return werr
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return withCode(ee.code, &quietError{err: err})
	}
	return &quietError{err: err}
}

// download is one file wait saves: an object of a task and where it goes;
// language names a parent's video of that language.
type download struct {
	key, path, language string
	limit               int64
	burned              bool // the video with subtitles drawn in
}

// finishDone downloads the outputs of a done task and prints where they
// are.
func finishDone(cmd *cobra.Command, b backend, t *view.Task, o waitOptions) error {
	ctx, out := cmd.Context(), cmd.OutOrStdout()
	files, err := downloadsOf(t, o.output)
	if err != nil {
		return err
	}
	w := waited{Task: t, SubtitlePaths: []string{}}
	for _, f := range files {
		if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
			return fmt.Errorf("save output: %w", err)
		}
		err := b.Fetch(ctx, t, f.key, f.path, f.limit)
		if errors.Is(err, errNoObject) && f.limit == maxSubtitleBytes {
			continue // a subtitle of the workers' layout that is not there
		}
		if err != nil {
			return err
		}
		switch {
		case f.limit == maxSubtitleBytes:
			w.SubtitlePaths = append(w.SubtitlePaths, f.path)
		case f.burned:
			w.BurnedPaths = append(w.BurnedPaths, f.path)
		case f.language != "":
			if w.OutputPaths == nil {
				w.OutputPaths = map[string]string{}
			}
			w.OutputPaths[f.language] = f.path
		default:
			w.OutputPath = f.path
		}
	}
	if o.json {
		return writeJSON(out, w)
	}
	if len(files) == 0 {
		fmt.Fprintf(out, "task %s done: no speech found in the video, nothing to dub\n", t.TaskID)
		return nil
	}
	targets := t.TargetLanguage
	if t.IsParent() {
		targets = strings.Join(t.TargetLanguages, ",")
	}
	fmt.Fprintf(out, "task %s done: %d segment(s) dubbed %s→%s\n", t.TaskID, t.Segments.Total, t.SourceLanguage, targets)
	// The subtitles first, the videos last (one per language).
	for _, p := range w.SubtitlePaths {
		fmt.Fprintf(out, "subtitles: %s\n", p)
	}
	for _, p := range w.BurnedPaths {
		fmt.Fprintf(out, "subtitles burned in: %s\n", p)
	}
	for _, f := range files {
		if f.limit != maxSubtitleBytes && !f.burned {
			fmt.Fprintln(out, f.path)
		}
	}
	return nil
}

// maxSubtitleBytes bounds the download of one subtitle file.
const maxSubtitleBytes = 16 << 20

// downloadsOf lists what a done task's outputs are saved as: its video at
// dest (default ./<task_id>.mp4) with its subtitles next to it, or for a
// parent each child's video at dest with the language before the
// extension, with the child's subtitles. A task without speech has none.
func downloadsOf(t *view.Task, dest string) ([]download, error) {
	if t.NoSpeech() {
		return nil, nil
	}
	limit, err := outputLimit()
	if err != nil {
		return nil, err
	}
	if dest == "" {
		dest = t.TaskID.String() + ".mp4"
	}
	if !t.IsParent() {
		if t.OutputVideoKey == "" {
			return nil, nil
		}
		return outputFiles(t.TaskID, t.OutputVideoKey, t.Result, []string{t.TargetLanguage, t.SourceLanguage}, dest, limit)
	}
	var out []download
	for _, c := range t.ChildrenOf() {
		if c.Status != view.Done {
			continue
		}
		files, err := outputFiles(c.TaskID, c.OutputVideoKey, c.Result, []string{c.TargetLanguage, t.SourceLanguage},
			languageOutput(dest, t.TaskID, c.TargetLanguage), limit)
		if err != nil {
			return nil, err
		}
		files[0].language = c.TargetLanguage
		out = append(out, files...)
	}
	return out, nil
}

// outputFiles lists one task's video, its subtitle files and its video
// with subtitles burned in (when it has one). The subtitles are the ones
// its result lists (source, target and bilingual; SRT and WebVTT), else
// the workers' layout of SRT files for the languages given; each is saved
// as <dest without extension>.<what follows the object's stem>, e.g.
// dub.es.srt, dub.es-en.vtt or dub.burned.mp4.
func outputFiles(id uuid.UUID, videoKey string, result []byte, langs []string, dest string, limit int64) ([]download, error) {
	out := []download{{key: videoKey, path: dest, limit: limit}}
	res := view.OutputOf(result)
	keys := make([]string, 0, len(res.Subtitles)+len(res.SubtitlesVTT))
	for _, subs := range []map[string]string{res.Subtitles, res.SubtitlesVTT} {
		for _, k := range subs {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		stem := strings.TrimSuffix(videoKey, path.Ext(videoKey))
		for _, l := range langs {
			if l != "" {
				keys = append(keys, stem+"."+l+".srt")
			}
		}
	}
	slices.Sort(keys)
	base := strings.TrimSuffix(dest, filepath.Ext(dest))
	stem := strings.TrimSuffix(path.Base(videoKey), path.Ext(videoKey)) + "."
	for _, key := range keys {
		if err := wire.CheckKey(key, wire.KindOutput, id); err != nil {
			return nil, fmt.Errorf("subtitle key %q: %w", key, err)
		}
		name := strings.TrimPrefix(path.Base(key), stem)
		if !subtitleName.MatchString(name) {
			return nil, fmt.Errorf("subtitle key %q: unexpected file name", key)
		}
		out = append(out, download{key: key, path: base + "." + name, limit: maxSubtitleBytes})
	}
	if key := res.BurnedVideoKey; key != "" {
		if err := wire.CheckKey(key, wire.KindOutput, id); err != nil || key != wire.BurnedKey(videoKey) {
			return nil, fmt.Errorf("burned video key %q: not the output's %s", key, wire.BurnedKey(videoKey))
		}
		out = append(out, download{key: key, path: base + ".burned" + filepath.Ext(dest), limit: limit, burned: true})
	}
	return out, nil
}

// subtitleName is what a subtitle's file name may end in: a language, or
// the target and source of a bilingual file, then .srt or .vtt.
var subtitleName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}(\.[A-Za-z0-9_-]{1,16})?\.(srt|vtt)$`)

// outputLimit bounds the download of a task's output video: the largest
// source video plus the largest audio the workers accept (MAX_VIDEO_BYTES +
// MAX_AUDIO_BYTES, read from the environment like the workers'), more than
// mux_video can write, so that a forged object cannot fill the disk.
func outputLimit() (int64, error) {
	var l config.Limits
	if err := config.Load(config.Environ(), &l); err != nil {
		return 0, err
	}
	return l.MaxVideoBytes + l.MaxAudioBytes, nil
}

// progressOf describes how far the task got: its status, steps and
// segments, and the units of work done of all (the parts of its steps; a
// step not fanned out yet counts as one).
func progressOf(t *view.Task) (desc string, done, total int) {
	for _, s := range t.Steps {
		if s.Status == view.Skipped {
			continue // no work: the task's plan leaves it out
		}
		parts := max(1, len(s.Parts))
		total += parts
		switch {
		case s.Status == "succeeded":
			done += parts
		default:
			for _, p := range s.Parts {
				if p.Status == "succeeded" {
					done++
				}
			}
		}
	}
	status := t.Status
	if cur := t.CurrentStep(); cur != "" && t.Status == view.Running {
		status = cur
	}
	desc = fmt.Sprintf("%-13s steps %d/%d", status, t.StepsDone(), len(t.Steps))
	if t.Segments.Total > 0 {
		desc += fmt.Sprintf(", segments %d/%d translated, %d/%d synthesized", t.Segments.Translated,
			t.Segments.Total, t.Segments.Synthesized, t.Segments.Total)
	}
	if t.Waiting != nil {
		desc += ", " + t.Waiting.Message
	}
	return desc, done, total
}

// progressLine shows the progress of a task: a progress bar redrawn in
// place on a terminal (schollz/progressbar), one line per change
// otherwise; a zero value (--json) shows nothing.
type progressLine struct {
	w    io.Writer
	bar  *progressbar.ProgressBar // nil: not a terminal
	last string
}

// newProgressLine shows progress on w, as a bar when w is a terminal.
func newProgressLine(w io.Writer, terminal bool) progressLine {
	p := progressLine{w: w}
	if terminal {
		// The bar draws with control characters of its own: it writes
		// past the escaper, and what it shows of the task is escaped
		// before (show).
		w := rawWriter(w)
		p.bar = progressbar.NewOptions(1,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetWidth(20),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(false),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetDescription("queued"),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
		)
	}
	return p
}

// show draws the task's progress t when it changed.
func (p *progressLine) show(t *view.Task) {
	if p.w == nil {
		return
	}
	desc, done, total := progressOf(t)
	desc = cell(desc)
	text := fmt.Sprintf("%s, %d/%d units done", desc, done, total)
	if text == p.last {
		return
	}
	p.last = text
	if p.bar == nil {
		fmt.Fprintf(p.w, "%s %s\n", time.Now().Format(time.TimeOnly), text)
		return
	}
	if p.bar.GetMax() != total {
		p.bar.ChangeMax(total)
	}
	p.bar.Describe(desc)
	_ = p.bar.Set(done)
}

// end ends the bar, once.
func (p *progressLine) end() {
	if p.bar != nil && !p.bar.IsFinished() {
		_ = p.bar.Exit() // the final newline, through OnCompletion
	}
	p.w, p.bar = nil, nil
}
