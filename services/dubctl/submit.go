package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"
)

// submitOptions are the flags of `dubctl submit`.
type submitOptions struct {
	input      string
	source     string
	target     string
	speaker    string
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
	f.StringVar(&o.target, "target", "", "language to dub into (default DEFAULT_TARGET_LANGUAGE)")
	f.StringVar(&o.speaker, "speaker", "", "voice of the dub (the synthesis engine's default when empty)")
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
	payload := wire.ExtractAudio{
		SourceVideoKey: wire.DefaultKeys(id).SourceVideo,
		OutputAudioKey: wire.DefaultKeys(id).SourceAudio,
		SourceLanguage: o.source,
		TargetLanguage: o.target,
		SpeakerID:      o.speaker,
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
	ids, err := createTask(ctx, pool, env, payload)
	if err != nil {
		return err
	}
	if err := outbox.Flush(ctx, pool, pub, ids); err != nil {
		// The message is committed in the outbox; a worker's sweep publishes it.
		fmt.Fprintf(cmd.ErrOrStderr(), "dubctl: warning: publish deferred to the outbox sweep: %v\n", err)
	}
	if o.wait {
		return followTask(cmd, c, id, o.waitOpts)
	}
	if o.waitOpts.json {
		v, err := loadTask(ctx, pool, id)
		if err != nil {
			return err
		}
		return writeJSON(cmd.OutOrStdout(), v)
	}
	fmt.Fprintln(cmd.OutOrStdout(), id)
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

// createTask creates the task (queued, announced by event.task.queued) and
// adds its first message to the outbox in one transaction, and returns the
// outbox rows to publish.
func createTask(ctx context.Context, pool *pgxpool.Pool, env *wire.Envelope, p wire.ExtractAudio) ([]int64, error) {
	body, err := json.Marshal(env)
	if err != nil {
		return nil, fmt.Errorf("encode %s message: %w", env.Step, err)
	}
	var ids []int64
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		res, err := task.Apply(ctx, tx, task.Create(task.Details{ID: env.TaskID, SourceLanguage: p.SourceLanguage,
			TargetLanguage: p.TargetLanguage, SpeakerID: p.SpeakerID, SourceVideoKey: p.SourceVideoKey,
			OutputVideoKey: wire.DefaultKeys(env.TaskID).OutputVideo, TraceID: env.TraceID}))
		if err != nil {
			return err
		}
		if !res.Changed {
			return fmt.Errorf("create task %s: it exists already", env.TaskID)
		}
		first := outbox.New(wire.Exchange, env.RoutingKey(), body)
		if err := outbox.Add(ctx, tx, first); err != nil {
			return err
		}
		ids = []int64{res.EventID, first.ID}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}
