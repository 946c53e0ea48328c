package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/dub"
	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/pkg/worker"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// handler runs the mux_video step.
type handler struct {
	db      *pgxpool.Pool
	objects blob.Objects
	cfg     Config
	// streaming are the tasks whose stream this process is making now
	// (single flight: see stream).
	streaming flights
	// kept are the sources of the streams made here (see sources).
	kept sources
}

// segment is one segment of the task with its texts, clip and the speed
// the engine spoke it at.
type segment struct {
	idx, startMS, endMS int
	src, mt             string
	key                 string // "" for a segment with nothing to say
	synthRate           float64
	nextMS              int // where the next line starts (0: unknown or none; read by streams only)
}

// Handle builds the dubbed video and finishes the task.
func (h *handler) Handle(ctx context.Context, msg *step.Message) error {
	var p wire.MuxVideo
	if err := msg.Decode(&p); err != nil {
		return err
	}
	if p.StreamAfter != "" {
		return h.stream(ctx, msg, p)
	}
	// The payload's keys were checked when the message was decoded
	// (wire.Decode): a message naming another task's objects never gets here.
	id := msg.Envelope.TaskID
	j := &job{h: h, p: p, opts: h.options(p.Options)}
	if err := j.opts.mix.Validate(); err != nil {
		return fault.Permanent(fmt.Errorf("options: %w", err))
	}
	err := h.db.QueryRow(ctx, `SELECT source_language, target_language, source_probe FROM tasks WHERE id = $1`, id).
		Scan(&j.srcLang, &j.dstLang, &j.probe)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fault.Permanent(fmt.Errorf("task %s not found", id))
	case err != nil:
		return fmt.Errorf("read task %s: %w", id, err)
	}
	plan, err := task.LoadPlan(ctx, h.db, id)
	if err != nil {
		return err
	}
	j.burnAs = plan.BurnSubtitles
	if j.segs, err = h.segments(ctx, id); err != nil {
		return err
	}
	if j.dir, err = scratch(); err != nil {
		return err
	}
	defer os.RemoveAll(j.dir)
	result, err := j.run(ctx)
	if err != nil {
		return err
	}
	body, err := json.Marshal(result)
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	if p.Version > 1 {
		j.restreamLogged(ctx, msg)
	}
	msg.Apply(task.Succeed(task.RefOf(msg.Envelope), body, p.OutputVideoKey))
	sum := j.report.Summary
	ev := msg.Log.Info().Str("output_video_key", p.OutputVideoKey).Int("segments", len(j.segs)).Str("background", j.report.Mix.Background).
		Int("sped_up", sum.SpedUp).Int("over_bound", sum.OverBound).Int("truncated", sum.Truncated)
	for _, l := range j.laps { // where the time went: video, clips, assemble, mux, store
		ev = ev.Float64(l.name+"_s", l.took.Seconds())
	}
	ev.Msg("video dubbed")
	return nil
}

// segments reads the task's segments in order; every one must have audio
// (or the empty-text marker).
func (h *handler) segments(ctx context.Context, id uuid.UUID) ([]segment, error) {
	type row struct {
		segment
		key    *string
		params []byte
	}
	rows, err := dub.ReadSegments(ctx, h.db, id, func(r pgx.CollectableRow) (row, error) {
		var s row
		err := r.Scan(&s.idx, &s.startMS, &s.endMS, &s.src, &s.mt, &s.key, &s.params)
		return s, err
	}, `SELECT idx, start_ms, end_ms, src_text, coalesce(mt_text, ''), tts_audio_key,
		coalesce(tts_params_json, '{}') FROM segments WHERE task_id = $1 ORDER BY idx`)
	if err != nil {
		return nil, err
	}
	var out []segment
	for i, r := range rows {
		if r.key == nil {
			return nil, fault.Permanent(fmt.Errorf("segment %d of task %s has no synthesized audio", i+1, id))
		}
		if *r.key != "" {
			if err := wire.CheckKey(*r.key, wire.KindTTS, id); err != nil {
				return nil, fault.Permanent(fmt.Errorf("segment %d audio key: %w", i+1, err))
			}
		}
		s := r.segment
		s.key, s.synthRate = *r.key, synthRate(r.params)
		out = append(out, s)
	}
	return out, nil
}

// clips downloads the segments' clips one at a time and returns their
// slots in the timeline, with the silence at each clip's edges. Segments
// without a clip stay silent.
func (h *handler) clips(ctx context.Context, dir string, segs []segment) ([]media.Slot, error) {
	var slots []media.Slot
	for i, s := range segs {
		if s.key == "" {
			continue
		}
		p := clipPath(dir, s.idx)
		if err := blob.Download(ctx, h.objects, s.key, p, blob.Need{MaxBytes: h.cfg.MaxClipBytes, Setting: "MAX_CLIP_BYTES"}); err != nil {
			return nil, err
		}
		m, err := media.MeasureClip(p)
		if err != nil {
			return nil, fault.Permanent(fmt.Errorf("clip %s: %w", s.key, err))
		}
		// N: the segment's number from 1 among all of the task's
		// segments (a silent one keeps its number), as dub.Segments counts.
		slot := media.Slot{N: i + 1, Idx: s.idx, StartMS: s.startMS, EndMS: s.endMS, AudioMS: m.DurationMS, SynthRate: s.synthRate,
			LeadMS: m.LeadMS, TrailMS: m.TrailMS}
		if i+1 < len(segs) {
			slot.NextStartMS = segs[i+1].startMS
		}
		slots = append(slots, slot)
	}
	return slots, nil
}

// scratch makes a scratch folder of the service's (worker.TempPrefix: its
// leftovers are swept at start); the caller removes it.
func scratch() (string, error) {
	dir, err := os.MkdirTemp("", worker.TempPrefix(service))
	if err != nil {
		return "", fmt.Errorf("make temp dir: %w", err)
	}
	return dir, nil
}

func clipPath(dir string, idx int) string {
	return filepath.Join(dir, fmt.Sprintf("seg-%06d.wav", idx))
}

// explain names MAX_VIDEO_SECONDS in an error that hit it.
func (h *handler) explain(err error) error {
	return worker.Limit(err, media.ErrTooLong, "MAX_VIDEO_SECONDS", h.cfg.MaxVideoSeconds)
}
