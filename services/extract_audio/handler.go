package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dubflow/dubflow/pkg/admit"
	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/cores"
	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/step"
	lifecycle "github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/tenant"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/pkg/worker"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// handler runs the extract_audio step.
type handler struct {
	objects blob.Objects
	db      *pgxpool.Pool
	cfg     Config
}

// task is what extract_audio settles about a task: the payload's values,
// else the task row's, else the configured defaults.
type task struct {
	sourceLanguage, targetLanguage, speakerID string
	outputVideoKey                            string
	probe                                     []byte // tasks.source_probe: the door's (media.ProbeRecord)
}

// Handle validates the video, extracts its audio, stores it and emits asr
// — or, for a task from subtitles, stages their cues as the segments and
// emits what follows them (fromSubtitles).
func (h *handler) Handle(ctx context.Context, msg *step.Message) error {
	var p wire.ExtractAudio
	if err := msg.Decode(&p); err != nil {
		return err
	}
	// The payload's keys were checked when the message was decoded
	// (wire.Decode): a message naming another task's objects never gets here.
	env := msg.Envelope
	t, err := h.resolve(ctx, env, p)
	if err != nil {
		return err
	}
	if err := h.planned(ctx, env, &p); err != nil {
		return err
	}
	if err := h.admit(ctx, t, &p); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", worker.TempPrefix(service))
	if err != nil {
		return fmt.Errorf("make temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	x, err := h.extract(ctx, dir, p, t)
	if err != nil {
		return err
	}
	info := x.info
	msg.Log.Info().Dur("video_duration", info.Duration).Str("audio_key", p.OutputAudioKey).
		Str("source_language", t.sourceLanguage).Str("target_language", t.targetLanguage).Msg("audio extracted")

	// The task row holds what every later step reads: the settled
	// languages, the speaker and the keys; its plan what it skips.
	details := t.details(env, p)
	details.SourceProbe = x.probe
	msg.Apply(lifecycle.Settle(details))
	if plan := lifecycle.PlanOf(p, t.sourceLanguage); !plan.IsZero() {
		sql, args := lifecycle.SavePlan(env.TaskID, plan)
		msg.Exec(sql, args...)
	}
	if err := stageGlossary(msg, p.Glossary); err != nil {
		return err
	}
	if p.SubtitlesKey != "" {
		return h.fromSubtitles(msg, t, p, x)
	}
	return emitASR(msg, wire.ASR{AudioKey: p.OutputAudioKey, Language: t.sourceLanguage,
		OutputKey: wire.DefaultKeys(env.TaskID).ASR})
}

// emitASR stages the asr message in its task's window: a project's tasks
// (its fair_scope) have at most a window of asr messages in the queue at
// once, so that another project's task takes turns with them instead of
// waiting behind all of them; the asr message of a task of its own scope
// goes at once, as before. asr's whole-audio message lets the next in.
func emitASR(msg *step.Message, p wire.ASR) error {
	return msg.EmitWindowed(wire.StepASR, cores.Usable(), []any{p})
}

// extracted is what extract made of a task's video.
type extracted struct {
	wav   string      // the audio, a local 16 kHz mono WAV file
	info  *media.Info // the video's probe
	probe []byte      // the record of it to keep for mux_video
	lines []line      // a task from subtitles: its lines
}

// extract downloads and probes the video into dir, reads the task's
// subtitles (checked against the video's length, before any audio is
// extracted), extracts the audio and stores it.
func (h *handler) extract(ctx context.Context, dir string, p wire.ExtractAudio, t task) (extracted, error) {
	var x extracted
	video := filepath.Join(dir, "source.media")
	// The download stops at MAX_VIDEO_BYTES whatever the object's metadata
	// says.
	if err := blob.Download(ctx, h.objects, p.SourceVideoKey, video, blob.Need{What: "source video", NonEmpty: true,
		MaxBytes: h.cfg.MaxVideoBytes, Setting: "MAX_VIDEO_BYTES"}); err != nil {
		return x, err
	}
	// The probe refuses a video that claims to be too long; the decode
	// enforces the limit on what the streams really hold.
	var err error
	if x.info, x.probe, err = h.probe(ctx, video, t.probe); err != nil {
		return x, fmt.Errorf("check %s: %w", p.SourceVideoKey, h.explain(err))
	}
	if p.SubtitlesKey != "" {
		target := lifecycle.PlanOf(p, t.sourceLanguage).Skips(wire.StepTranslate)
		if x.lines, err = h.readSubtitles(ctx, p, target, admit.DurationMS(x.info.Duration)); err != nil {
			return x, err
		}
	}
	x.wav = filepath.Join(dir, "source.wav")
	if err := media.ExtractAudio(ctx, video, x.wav, h.cfg.MaxDuration()); err != nil {
		return x, fmt.Errorf("extract audio of %s: %w", p.SourceVideoKey, h.explain(err))
	}
	if err := h.objects.PutFile(ctx, p.OutputAudioKey, x.wav, "audio/wav"); err != nil {
		return x, fmt.Errorf("store %s: %w", p.OutputAudioKey, err)
	}
	return x, nil
}

// resolve settles the task's languages, speaker and output key, and makes
// sure its row exists.
func (h *handler) resolve(ctx context.Context, env *wire.Envelope, p wire.ExtractAudio) (task, error) {
	var row task
	err := h.db.QueryRow(ctx, `SELECT source_language, target_language, speaker_id, output_video_key, source_probe
		FROM tasks WHERE id = $1`, env.TaskID).
		Scan(&row.sourceLanguage, &row.targetLanguage, &row.speakerID, &row.outputVideoKey, &row.probe)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return task{}, fmt.Errorf("read task %s: %w", env.TaskID, err)
	}
	t := task{
		sourceLanguage: first(p.SourceLanguage, row.sourceLanguage, h.cfg.DefaultSourceLanguage),
		targetLanguage: first(p.TargetLanguage, row.targetLanguage, h.cfg.DefaultTargetLanguage),
		speakerID:      first(p.SpeakerID, row.speakerID),
		outputVideoKey: first(row.outputVideoKey, wire.DefaultKeys(env.TaskID).OutputVideo),
		probe:          row.probe,
	}
	if err := wire.CheckKey(t.outputVideoKey, wire.KindOutput, env.TaskID); err != nil {
		return task{}, fault.Permanent(fmt.Errorf("task's output_video_key: %w", err))
	}
	if errors.Is(err, pgx.ErrNoRows) {
		// A message published straight to the exchange (without dubctl):
		// the task's row is made now, so that its progress and failure are
		// recorded from the first step on. Its event.task.queued waits in
		// the outbox for the runtime's sweep.
		d := t.details(env, p)
		d.Project = first(p.Project, tenant.Default)
		if _, err := lifecycle.Apply(ctx, h.db, lifecycle.Create(d)); err != nil {
			return task{}, fmt.Errorf("create task %s: %w", env.TaskID, err)
		}
	}
	return t, nil
}

// planned fills in what the payload leaves out of the plan recorded with
// the task at submit (its subtitles, its burned-in subtitles), as resolve
// does for the languages: a message rebuilt from the task row (the
// reconciler's re-drive of a lost first message) starts the task the door
// admitted, not one recognised from scratch.
func (h *handler) planned(ctx context.Context, env *wire.Envelope, p *wire.ExtractAudio) error {
	plan, err := lifecycle.LoadPlan(ctx, h.db, env.TaskID)
	if err != nil {
		return err
	}
	if p.SubtitlesKey == "" && plan.SubtitlesKey != "" {
		p.SubtitlesKey, p.SubtitlesLanguage, p.SourceSubtitlesKey = plan.SubtitlesKey, plan.SubtitlesLanguage, plan.SourceSubtitlesKey
		for field, key := range map[string]string{"subtitles_key": p.SubtitlesKey, "source_subtitles_key": p.SourceSubtitlesKey} {
			if err := wire.CheckKey(key, wire.KindSubtitles, env.TaskID); key != "" && err != nil {
				return fault.Permanent(fmt.Errorf("task's %s: %w", field, err))
			}
		}
	}
	p.BurnSubtitles = cmp.Or(p.BurnSubtitles, plan.BurnSubtitles)
	return nil
}

// checkProject refuses, as a permanent error (the message is
// dead-lettered with this reason and the task failed), a project that is
// not one of the projects' records: an outside publisher's message names
// its project, and only an existing one may own a task.
func (h *handler) checkProject(ctx context.Context, project string) error {
	if project == "" {
		return nil
	}
	ok, err := tenant.Exists(ctx, h.db, project)
	if err != nil {
		return err
	}
	if !ok {
		return fault.Permanent(fmt.Errorf("project %q: no such project (an operator creates it: dubctl project create)", project))
	}
	return nil
}

// admit refuses, as a permanent error, a task of a project that does not
// exist (checkProject), a task whose languages the engines cannot handle
// (a step its subtitles skip is not judged), whose subtitles are in
// neither its source nor its target language, or whose speaker no tts
// engine has as a voice —
// pkg/admit's check, the one every door runs, by what the asr, translate
// and tts workers announced — or whose glossary breaks the glossary's
// rules (admit.Glossary: the text rule, each source term once), or that
// asks a review of a task dubbed into several languages (admit.Review), before
// anything is downloaded or transcribed. An outside publisher's message
// reaches no other door.
func (h *handler) admit(ctx context.Context, t task, p *wire.ExtractAudio) error {
	if err := h.checkProject(ctx, p.Project); err != nil {
		return err
	}
	if err := admit.Glossary(p.Glossary); err != nil {
		return fault.Permanent(err)
	}
	if err := admit.Review(p.Review, p.Targets()); err != nil {
		return fault.Permanent(err)
	}
	caps, err := admit.LoadCapabilities(ctx, h.db)
	if err != nil {
		return err
	}
	targets := p.Targets()
	if len(targets) == 0 {
		targets = []string{t.targetLanguage}
	}
	if p.SubtitlesKey != "" {
		// The file's language settled: the source's or the one target's.
		if p.SubtitlesLanguage, err = admit.SubtitlesLanguage(p.SubtitlesLanguage, t.sourceLanguage, targets,
			p.SourceSubtitlesKey != ""); err != nil {
			return fault.Permanent(err)
		}
	}
	if err := admit.LanguagesSkipping(t.sourceLanguage, targets, caps, p.SkippedSteps(t.sourceLanguage)); err != nil {
		return fault.Permanent(err)
	}
	if err := admit.Speaker(t.speakerID, caps); err != nil {
		return fault.Permanent(err)
	}
	return nil
}

// details are what the task's row records of t.
func (t task) details(env *wire.Envelope, p wire.ExtractAudio) lifecycle.Details {
	return lifecycle.Details{ID: env.TaskID, SourceLanguage: t.sourceLanguage, TargetLanguage: t.targetLanguage,
		SpeakerID: t.speakerID, SourceVideoKey: p.SourceVideoKey, OutputVideoKey: t.outputVideoKey, TraceID: env.TraceID,
		Project: p.Project, Targets: p.Targets(), Review: p.Review}
}

// explain names MAX_VIDEO_SECONDS in an error that hit it.
func (h *handler) explain(err error) error {
	return worker.Limit(err, media.ErrTooLong, "MAX_VIDEO_SECONDS", h.cfg.MaxVideoSeconds)
}

// first returns the first non-empty value.
func first(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}

// probe describes the downloaded video and checks it against the limits:
// with the probe recorded with the task (the door's, or this step's on an
// earlier attempt) when the bytes and the ffprobe are the ones it was made
// with, else with ffprobe. It returns the record to keep for mux_video.
func (h *handler) probe(ctx context.Context, video string, recorded []byte) (*media.Info, []byte, error) {
	lim := media.Limits{MaxDuration: h.cfg.MaxDuration(), RequireAudio: true, RequireVideo: true}
	info, reused, err := media.ProbeReusing(ctx, video, recorded, lim)
	if err != nil || reused {
		return info, recorded, err
	}
	raw, err := media.RecordProbeJSON(video, info)
	return info, raw, err
}
