package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/dubflow/dubflow/pkg/compensation"
	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/ops"
	"github.com/dubflow/dubflow/pkg/service"
)

// run parses the flags, then runs one pass, or a pass every -every until
// ctx is cancelled (serving the ops endpoints meanwhile, like every
// long-running service).
func run(ctx context.Context, args []string, environ map[string]string, stdout, stderr io.Writer) error {
	f, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	var cfg config.Common
	p, err := service.Start(ctx, "tts_requeue", environ, &cfg, service.LogTo(stderr))
	if err != nil {
		return err
	}
	defer p.Close()
	pass := func(ctx context.Context) error {
		tasks, err := compensation.Requeue(ctx, p.Pool, p.Publisher(), f.opts)
		if perr := f.print(stdout, tasks); perr != nil {
			return perr
		}
		p.Log.Info().Int("tasks", len(tasks)).Bool("dry_run", f.opts.DryRun).Err(err).Msg("tts_requeue pass")
		return err
	}
	if f.every == 0 {
		return pass(ctx)
	}
	passLogged := func(ctx context.Context) {
		if err := pass(ctx); err != nil && ctx.Err() == nil {
			p.Log.Error().Err(err).Msg("tts_requeue pass failed; trying again at the next")
		}
	}
	return p.Run(ctx, func(ctx context.Context) error {
		passLogged(ctx)
		ops.Every(ctx, f.every, passLogged)
		return nil
	})
}

// flags are tts_requeue's command line.
type flags struct {
	opts   compensation.Options
	every  time.Duration
	asJSON bool
}

func parseFlags(args []string, stderr io.Writer) (flags, error) {
	fs := flag.NewFlagSet("tts_requeue", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f flags
	fs.IntVar(&f.opts.Limit, "limit", 100, "re-drive at most this many tasks per pass")
	fs.BoolVar(&f.opts.DryRun, "dry-run", false, "list the tasks without re-driving them")
	fs.DurationVar(&f.every, "every", 0, "run a pass every this long until stopped (0: one pass)")
	fs.BoolVar(&f.opts.Running, "running", false, "also re-drive running tasks missing tts audio (the reconciler re-drives their lost messages on its own)")
	fs.DurationVar(&f.opts.MinIdle, "min-idle", 2*time.Minute, "with -running: spare running tasks that made progress more recently than this")
	fs.BoolVar(&f.asJSON, "json", false, "print each pass as a JSON array")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if f.opts.Limit < 1 || f.opts.Limit > 10000 {
		return f, fmt.Errorf("-limit %d: want 1..10000", f.opts.Limit)
	}
	if f.every < 0 || f.opts.MinIdle < 0 {
		return f, errors.New("-every and -min-idle must not be negative")
	}
	return f, nil
}

// print writes one pass's tasks to w: a JSON array with -json, else a line
// per task.
func (f flags) print(w io.Writer, tasks []compensation.Task) error {
	if f.asJSON {
		if tasks == nil {
			tasks = []compensation.Task{}
		}
		return json.NewEncoder(w).Encode(tasks)
	}
	for _, t := range tasks {
		if f.opts.DryRun {
			fmt.Fprintf(w, "would requeue task %s (%s): %d segments without audio %v\n",
				t.TaskID, t.Status, len(t.Missing), t.Missing)
			continue
		}
		fmt.Fprintf(w, "requeued task %s (%s): %d segments without audio %v, tts attempt %d\n",
			t.TaskID, t.Status, len(t.Missing), t.Missing, t.Attempt)
	}
	return nil
}
