package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
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

// submitCmd builds `dubctl submit`.
func submitCmd() *cobra.Command {
	var o submitOptions
	cmd := &cobra.Command{
		Use:   "submit --input FILE [--source en] [--target es] [--speaker S] [--wait]",
		Short: "Upload a video and start dubbing it",
		Long: `submit checks the video locally with ffprobe (it must be media with an audio
and a video stream), uploads it to videos/{task_id}/source.mp4, creates the
task and publishes task.extract_audio (the task row and the message commit
together through the outbox). It prints the task id, or with --json the task.
With --wait it then follows the task like "dubctl wait".`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runSubmit(cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.input, "input", "i", "", "video file to dub (required)")
	f.StringVar(&o.source, "source", "", "language spoken in the video (default DEFAULT_SOURCE_LANGUAGE)")
	f.StringVar(&o.target, "target", "", "language to dub into (default DEFAULT_TARGET_LANGUAGE); several separated by commas (es,ca): transcribed once, one child task per language")
	f.StringVar(&o.speaker, "speaker", "", "voice of the dub (the synthesis engine's default when empty)")
	f.StringVar(&o.glossary, "glossary", "", "CSV file of terms the translation keeps to: source,target (empty target: keep the term)")
	f.BoolVar(&o.noValidate, "no-validate", false, "upload without the local ffprobe check (the workers still check)")
	f.BoolVar(&o.wait, "wait", false, "follow the task until it ends")
	o.waitOpts.register(cmd)
	_ = cmd.MarkFlagRequired("input")
	return cmd
}

func runSubmit(cmd *cobra.Command, o submitOptions) error {
	ctx := cmd.Context()
	c, err := newClients()
	if err != nil {
		return err
	}
	defer c.close()
	if o.source == "" {
		o.source = c.cfg.DefaultSourceLanguage
	}
	if o.target == "" {
		o.target = c.cfg.DefaultTargetLanguage
	}
	if err := o.waitOpts.check(); err != nil {
		return err
	}
	if err := checkInput(ctx, o.input, !o.noValidate); err != nil {
		return err
	}
	id := uuid.New()
	payload, err := submitPayload(id, o)
	if err != nil {
		return err
	}
	env, err := wire.New(wire.StepExtractAudio, id, "", payload)
	if err != nil {
		return usageError(err)
	}
	// Connect to everything before changing anything.
	pool, err := c.db(ctx)
	if err != nil {
		return err
	}
	objects, err := c.blob(ctx)
	if err != nil {
		return err
	}
	pub, err := c.publisher(ctx)
	if err != nil {
		return err
	}
	if err := objects.PutFile(ctx, payload.SourceVideoKey, o.input, "video/mp4"); err != nil {
		return err
	}
	// Uploaded once, whatever the languages: where the transcription ends
	// the system copies it to each language's child task (server-side).
	ids, err := task.Submit(ctx, pool, env, payload)
	if err != nil {
		return err
	}
	if err := outbox.Flush(ctx, pool, pub, ids); err != nil {
		// The message is committed in the outbox; a worker's sweep publishes it.
		fmt.Fprintf(cmd.ErrOrStderr(), "dubctl: warning: publish deferred to the outbox sweep: %v\n", err)
	}
	return reportSubmitted(cmd, c, pool, id, o)
}

// reportSubmitted follows the submitted task (--wait) or prints it.
func reportSubmitted(cmd *cobra.Command, c *clients, pool *pgxpool.Pool, id uuid.UUID, o submitOptions) error {
	if o.wait {
		return followTask(cmd, c, id, o.waitOpts)
	}
	if o.waitOpts.json {
		v, err := loadTask(cmd.Context(), pool, id)
		if err != nil {
			return err
		}
		return writeJSON(cmd.OutOrStdout(), v)
	}
	fmt.Fprintln(cmd.OutOrStdout(), id)
	return nil
}

// submitPayload is the extract_audio payload of a new task.
func submitPayload(id uuid.UUID, o submitOptions) (wire.ExtractAudio, error) {
	p := wire.ExtractAudio{
		SourceVideoKey: wire.DefaultKeys(id).SourceVideo,
		OutputAudioKey: wire.DefaultKeys(id).SourceAudio,
		SourceLanguage: o.source,
		SpeakerID:      o.speaker,
	}
	targets, err := parseTargets(o.target)
	if err != nil {
		return p, err
	}
	p.TargetLanguage = targets[0]
	if len(targets) > 1 {
		p.TargetLanguages = targets
	}
	p.Glossary, err = readGlossary(o.glossary)
	return p, err
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
