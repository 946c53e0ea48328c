package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
)

// pollInterval is how often wait reads the task's progress; a change of
// its status (to done, say) wakes it at once (task.Listener).
const pollInterval = 500 * time.Millisecond

// waitOptions are the flags wait shares with submit --wait.
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
	f.BoolVar(&o.json, "json", false, "print the task as JSON instead of text, without a progress bar")
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
		Long: `wait shows the task's progress (pipeline steps done, segments translated and
synthesized) until it ends. When the task is done it downloads the dubbed
video to --output and the subtitles (SRT) next to it. A failed task prints
its error and exits 1; a compensating task (speech synthesis of some segments
still fails) says how to re-drive it and exits 4; a timeout exits 3.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseTaskID(args[0])
			if err != nil {
				return err
			}
			if err := o.check(); err != nil {
				return err
			}
			c, err := newClients()
			if err != nil {
				return err
			}
			defer c.close()
			return followTask(cmd, c, id, o)
		},
	}
	o.register(cmd)
	return cmd
}

// followTask reads the task every pollInterval, and whenever its status
// changes, until it ends or o.timeout passes, then reports the outcome.
func followTask(cmd *cobra.Command, c *clients, id uuid.UUID, o waitOptions) error {
	ctx := cmd.Context()
	out := cmd.OutOrStdout()
	pool, err := c.db(ctx)
	if err != nil {
		return err
	}
	var bar *progress
	if !o.json && isTerminal(out) {
		bar = newProgress(out)
	}
	deadline := time.Now().Add(o.timeout)
	changes := task.Listen(ctx, pool)
	defer changes.Close()
	itsOwn := func(changed string) bool { return changed == id.String() }
	for {
		v, err := loadTask(ctx, pool, id)
		if err != nil {
			bar.stop()
			return err
		}
		bar.update(v)
		switch v.Status {
		case taskDone:
			bar.stop()
			return finishDone(ctx, cmd, c, v, o)
		case taskFailed:
			bar.stop()
			return report(out, v, o, withCode(exitFailed, fmt.Errorf("task %s failed: %s", id, v.Error)))
		case taskCancelled:
			bar.stop()
			return report(out, v, o, withCode(exitFailed, fmt.Errorf("task %s was %s", id, v.Error)))
		case taskCompensating:
			bar.stop()
			return report(out, v, o, withCode(exitCompensated, fmt.Errorf(
				"task %s is compensating: speech synthesis failed for %d segment(s) after all retries; "+
					"fix the cause, then re-drive it with `tts_requeue -limit 100` (see `dubctl status %s`)",
				id, v.Segments.FailedTTS, id)))
		}
		if time.Now().After(deadline) {
			bar.stop()
			return report(out, v, o, withCode(exitTimeout, fmt.Errorf(
				"task %s still %s after %s (at step %s); `dubctl wait %s` continues", id, v.Status, o.timeout,
				v.currentStep(), id)))
		}
		if err := changes.Wait(ctx, pollInterval, itsOwn); err != nil {
			bar.stop()
			return fmt.Errorf("wait for %s: %w", id, err)
		}
	}
}

// report prints the task as JSON (and exits with err's code quietly) or
// returns err for dubctl to print.
func report(out io.Writer, v *taskView, o waitOptions, err error) error {
	if !o.json {
		return err
	}
	if werr := writeJSON(out, v); werr != nil {
		return werr
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return withCode(ee.code, &quietError{err: err})
	}
	return &quietError{err: err}
}

// finishDone downloads the results of a done task and prints where they are.
func finishDone(ctx context.Context, cmd *cobra.Command, c *clients, v *taskView, o waitOptions) error {
	out := cmd.OutOrStdout()
	if isParent(v.Languages) && !v.noSpeech() {
		return finishLanguages(ctx, cmd, c, v, o)
	}
	if v.noSpeech() || v.OutputVideoKey == "" {
		if o.json {
			return writeJSON(out, v)
		}
		fmt.Fprintf(out, "task %s done: no speech found in the video, nothing to dub\n", v.TaskID)
		return nil
	}
	objects, err := c.blob(ctx)
	if err != nil {
		return err
	}
	dest := o.output
	if dest == "" {
		dest = v.TaskID.String() + ".mp4"
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return fmt.Errorf("save output: %w", err)
	}
	limit, err := outputLimit()
	if err != nil {
		return err
	}
	if err := objects.GetFile(ctx, v.OutputVideoKey, dest, limit); err != nil {
		if errors.Is(err, blob.ErrTooLarge) {
			return fmt.Errorf("%w (MAX_VIDEO_BYTES+MAX_AUDIO_BYTES)", err)
		}
		return err
	}
	v.OutputPath = dest
	subs, err := downloadSubtitles(ctx, objects, v, dest)
	if err != nil {
		return err
	}
	v.SubtitlePaths = subs
	if o.json {
		return writeJSON(out, v)
	}
	fmt.Fprintf(out, "task %s done: %d segment(s) dubbed %s→%s\n", v.TaskID, v.Segments.Total,
		v.SourceLanguage, v.TargetLanguage)
	for _, s := range subs {
		fmt.Fprintf(out, "subtitles: %s\n", s)
	}
	fmt.Fprintln(out, dest)
	return nil
}

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

// downloadSubtitles saves the task's SRT files next to dest, named
// <dest without .mp4>.<lang>.srt. The keys come from the result's
// "subtitles" when it lists them, else the workers' layout
// (outputs/{id}/final.<lang>.srt) for both languages.
func downloadSubtitles(ctx context.Context, objects *blob.Store, v *taskView, dest string) ([]string, error) {
	keys, listed := subtitleKeys(v)
	base := strings.TrimSuffix(dest, filepath.Ext(dest))
	var paths []string
	for _, key := range keys {
		if err := wire.CheckKey(key, wire.KindOutput, v.TaskID); err != nil {
			return nil, fmt.Errorf("subtitle key %q: %w", key, err)
		}
		name := path.Base(key)
		lang := strings.TrimSuffix(name, ".srt")
		if i := strings.LastIndex(lang, "."); i >= 0 {
			lang = lang[i+1:]
		}
		p := base + "." + lang + ".srt"
		err := objects.GetFile(ctx, key, p, 16<<20)
		if errors.Is(err, blob.ErrNotFound) && !listed {
			continue
		}
		if err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// subtitleKeys returns the SRT keys of a done task and whether the result
// listed them.
func subtitleKeys(v *taskView) ([]string, bool) {
	var r struct {
		Subtitles json.RawMessage `json:"subtitles"`
	}
	_ = json.Unmarshal(v.Result, &r)
	var found []string
	collectSRT(r.Subtitles, &found)
	if len(found) > 0 {
		return found, true
	}
	dir := path.Dir(v.OutputVideoKey)
	stem := strings.TrimSuffix(path.Base(v.OutputVideoKey), path.Ext(v.OutputVideoKey))
	var keys []string
	for _, lang := range []string{v.TargetLanguage, v.SourceLanguage} {
		if lang != "" {
			keys = append(keys, dir+"/"+stem+"."+lang+".srt")
		}
	}
	return keys, false
}

// collectSRT finds every string ending in ".srt" in a JSON value, whatever
// its shape (a list of keys, a map by language, a list of objects).
func collectSRT(raw json.RawMessage, found *[]string) {
	if len(raw) == 0 {
		return
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if strings.HasSuffix(s, ".srt") && !contains(*found, s) {
			*found = append(*found, s)
		}
		return
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) == nil {
		for _, e := range list {
			collectSRT(e, found)
		}
		return
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) == nil {
		for _, e := range obj {
			collectSRT(e, found)
		}
	}
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// progress is the terminal progress bar of wait: one unit per pipeline
// step, one per segment translated and one per segment synthesized. A nil
// *progress draws nothing.
type progress struct {
	bar *progressbar.ProgressBar
}

func newProgress(w io.Writer) *progress {
	return &progress{bar: progressbar.NewOptions(len(wire.Pipeline),
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetWidth(30),
		progressbar.OptionShowCount(),
		progressbar.OptionSetPredictTime(false),
		progressbar.OptionShowElapsedTimeOnFinish(),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSetDescription("queued"),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
	)}
}

func (p *progress) update(v *taskView) {
	if p == nil {
		return
	}
	total := len(wire.Pipeline) + 2*v.Segments.Total
	if p.bar.GetMax() != total {
		p.bar.ChangeMax(total)
	}
	desc := v.Status
	if cur := v.currentStep(); cur != "" && v.Status == taskRunning {
		desc = cur
	}
	desc = fmt.Sprintf("%-13s steps %d/%d", desc, v.stepsDone(), len(wire.Pipeline))
	if v.Segments.Total > 0 {
		desc += fmt.Sprintf(", segments %d/%d translated, %d/%d synthesized", v.Segments.Translated,
			v.Segments.Total, v.Segments.Synthesized, v.Segments.Total)
	}
	p.bar.Describe(desc)
	_ = p.bar.Set(v.stepsDone() + v.Segments.Translated + v.Segments.Synthesized)
}

func (p *progress) stop() {
	if p == nil {
		return
	}
	if !p.bar.IsFinished() {
		_ = p.bar.Exit() // prints the final newline through OnCompletion
	}
}
