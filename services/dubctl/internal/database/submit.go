package database

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/dubflow/dubflow/pkg/admit"
	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/tenant"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/dubflow/dubflow/services/dubctl/internal/shape"
	"github.com/google/uuid"
)

// Rules are the configured default languages and media limits and what
// the workers' engines announced (admit.LoadCapabilities).
func (d *Backend) Rules(ctx context.Context) (admit.Rules, admit.Limits, error) {
	var limits config.Limits
	if err := config.Load(config.Environ(), &limits); err != nil {
		return admit.Rules{}, admit.Limits{}, err
	}
	pool, err := d.db(ctx)
	if err != nil {
		return admit.Rules{}, admit.Limits{}, err
	}
	caps, err := admit.LoadCapabilities(ctx, pool)
	if err != nil {
		return admit.Rules{}, admit.Limits{}, err
	}
	return admit.Rules{DefaultSource: d.cfg.DefaultSourceLanguage, DefaultTarget: d.cfg.DefaultTargetLanguage,
		Capabilities: caps}, admit.LimitsOf(limits), nil
}

// Submit uploads the video to videos/{id}/source.mp4 (and the subtitle
// files to subtitles/{id}/), then creates the task and its first message in one transaction (task.Submit) and
// publishes it. Everything is connected before anything is changed.
func (d *Backend) Submit(ctx context.Context, s shape.Submission) (uuid.UUID, error) {
	if s.IdempotencyKey == "" {
		return d.submit(ctx, s, uuid.New())
	}
	pool, err := d.db(ctx)
	if err != nil {
		return uuid.Nil, err
	}
	return submitOnce(ctx, pool, s, d.submit)
}

// submit creates the task id of s (Submit).
func (d *Backend) submit(ctx context.Context, s shape.Submission, id uuid.UUID) (uuid.UUID, error) {
	p := s.Task.Payload(id)
	p.Project = cmp.Or(s.Project, tenant.Default)
	env, err := wire.New(wire.StepExtractAudio, id, "", p)
	if err != nil {
		return uuid.Nil, cli.UsageError(err)
	}
	pool, err := d.db(ctx)
	if err != nil {
		return uuid.Nil, err
	}
	if ok, err := tenant.Exists(ctx, pool, p.Project); err != nil || !ok {
		if err == nil { // the console's words
			err = cli.UsageError(fmt.Errorf("project %q: no such project", p.Project))
		}
		return uuid.Nil, err
	}
	objects, err := d.blob(ctx)
	if err != nil {
		return uuid.Nil, err
	}
	if _, err := d.publisher(ctx); err != nil {
		return uuid.Nil, err
	}
	// Uploaded once, whatever the languages: where the transcription ends
	// the system copies it to each language's child task (server-side).
	if err := objects.PutFile(ctx, p.SourceVideoKey, s.Input, "video/mp4"); err != nil {
		return uuid.Nil, err
	}
	for _, f := range s.Task.SubtitleFiles(id) {
		if err := objects.Put(ctx, f.Key, strings.NewReader(f.Text), int64(len(f.Text)), f.ContentType); err != nil {
			return uuid.Nil, err
		}
	}
	// Not in outbox.Commit: a submission commits in a transaction of its
	// own, which rides over a database failover (task.SubmitProbed).
	ids, err := task.SubmitProbed(ctx, pool, env, p, s.Task.FileName, s.Probe)
	target := id.String()
	if err != nil {
		target = ""
	}
	d.record(ctx, actionOf("submit", target, http.StatusCreated), err)
	if err != nil {
		return uuid.Nil, err
	}
	d.publish(ctx, ids)
	return id, nil
}
