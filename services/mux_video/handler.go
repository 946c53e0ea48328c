package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/pkg/worker"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// objects is the part of the object store mux_video uses.
type objects interface {
	Stat(ctx context.Context, key string) (blob.Info, error)
	GetFile(ctx context.Context, key, path string, maxBytes int64) error
	PutFile(ctx context.Context, key, path, contentType string) error
}

// handler runs the mux_video step.
type handler struct {
	db      *pgxpool.Pool
	objects objects
	cfg     Config
}

// segment is one segment of the task with its texts and clip.
type segment struct {
	idx, startMS, endMS int
	src, mt             string
	key                 string // "" for a segment with nothing to say
}

// Handle builds the dubbed video and finishes the task.
func (h *handler) Handle(ctx context.Context, msg *step.Message) error {
	var p wire.MuxVideo
	if err := msg.Decode(&p); err != nil {
		return err
	}
	id := msg.Envelope.TaskID
	for _, k := range []struct{ name, key, kind string }{
		{"source_video_key", p.SourceVideoKey, wire.KindVideo},
		{"tts_audio_key", p.TTSAudioKey, wire.KindTTS},
		{"output_video_key", p.OutputVideoKey, wire.KindOutput},
	} {
		if err := wire.CheckKey(k.key, k.kind, id); err != nil {
			return step.Permanent(fmt.Errorf("%s: %w", k.name, err))
		}
	}
	var srcLang, dstLang string
	err := h.db.QueryRow(ctx, `SELECT source_language, target_language FROM tasks WHERE id = $1`, id).Scan(&srcLang, &dstLang)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return step.Permanent(fmt.Errorf("task %s not found", id))
	case err != nil:
		return fmt.Errorf("read task %s: %w", id, err)
	}
	segs, err := h.segments(ctx, id)
	if err != nil {
		return err
	}

	dir, err := os.MkdirTemp("", worker.TempPrefix(service))
	if err != nil {
		return fmt.Errorf("make temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	video := filepath.Join(dir, "source.media")
	if err := h.download(ctx, p.SourceVideoKey, video, h.cfg.MaxVideoBytes, "MAX_VIDEO_BYTES"); err != nil {
		return err
	}
	// The claimed length sizes the dub track: it must be within the limit,
	// and Mux checks the length the streams really have.
	info, err := media.ProbeInput(ctx, video, media.Limits{RequireVideo: true, MaxDuration: h.cfg.MaxDuration()})
	if err != nil {
		return fmt.Errorf("check %s: %w", p.SourceVideoKey, h.explain(err))
	}
	totalMS := int(info.Duration.Milliseconds())

	// Fit each clip to its slot, then assemble the dub track from the
	// clips on disk, streaming.
	slots, err := h.clips(ctx, dir, segs)
	if err != nil {
		return err
	}
	opts := media.FitOptions{MaxSpeedup: h.cfg.MaxSpeedup, TotalMS: totalMS}
	placements := media.Fit(slots, opts)
	dub := filepath.Join(dir, "dub.wav")
	if err := media.AssembleDub(ctx, placements, func(idx int) string { return clipPath(dir, idx) }, totalMS, dub); err != nil {
		return err
	}
	report := media.NewTimingReport(placements, opts)

	// Subtitles of both languages, next to the output.
	outDir := path.Dir(p.OutputVideoKey)
	srcKey := outDir + "/final." + srcLang + ".srt"
	dstKey := outDir + "/final." + dstLang + ".srt"
	if dstKey == srcKey {
		dstKey = outDir + "/final." + dstLang + ".dub.srt"
	}
	srcSRT, dstSRT := filepath.Join(dir, "source.srt"), filepath.Join(dir, "dub.srt")
	if err := writeSRT(srcSRT, segs, func(s segment) string { return s.src }); err != nil {
		return err
	}
	if err := writeSRT(dstSRT, segs, func(s segment) string { return s.mt }); err != nil {
		return err
	}
	timing := filepath.Join(dir, "timing.json")
	if err := writeJSON(timing, report); err != nil {
		return err
	}

	out := filepath.Join(dir, "final.mp4")
	err = media.Mux(ctx, media.MuxInput{
		Video: video, DubWav: dub, DubLanguage: dstLang, OriginalLanguage: srcLang,
		Subtitles: []media.Subtitle{
			{Path: dstSRT, Language: dstLang, Title: "Dub (" + dstLang + ")"},
			{Path: srcSRT, Language: srcLang, Title: "Original (" + srcLang + ")"},
		},
		MaxDuration: h.cfg.MaxDuration(),
	}, out)
	if err != nil {
		return fmt.Errorf("mux %s: %w", p.SourceVideoKey, h.explain(err))
	}
	timingKey := outDir + "/timing.json"
	for _, up := range []struct{ key, file, contentType string }{
		{p.TTSAudioKey, dub, "audio/wav"},
		{srcKey, srcSRT, "application/x-subrip"},
		{dstKey, dstSRT, "application/x-subrip"},
		{timingKey, timing, "application/json"},
		{p.OutputVideoKey, out, "video/mp4"},
	} {
		if err := h.objects.PutFile(ctx, up.key, up.file, up.contentType); err != nil {
			return fmt.Errorf("store %s: %w", up.key, err)
		}
	}

	result, err := json.Marshal(map[string]any{
		"output_video_key":  p.OutputVideoKey,
		"dub_audio_key":     p.TTSAudioKey,
		"subtitles":         map[string]string{srcLang: srcKey, dstLang: dstKey},
		"timing_report_key": timingKey,
		"segments":          len(segs),
		"duration_ms":       totalMS,
		"timing":            report.Summary,
	})
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	msg.Apply(task.Succeed(task.RefOf(msg.Envelope), result, p.OutputVideoKey))
	msg.Log.Info().Str("output_video_key", p.OutputVideoKey).Int("segments", len(segs)).
		Int("sped_up", report.Summary.SpedUp).Int("truncated", report.Summary.Truncated).Msg("video dubbed")
	return nil
}

// segments reads the task's segments in order; every one must have audio
// (or the empty-text marker).
func (h *handler) segments(ctx context.Context, id uuid.UUID) ([]segment, error) {
	rows, err := h.db.Query(ctx, `SELECT idx, start_ms, end_ms, src_text, coalesce(mt_text, ''), tts_audio_key
		FROM segments WHERE task_id = $1 ORDER BY idx`, id)
	if err != nil {
		return nil, fmt.Errorf("read segments of %s: %w", id, err)
	}
	defer rows.Close()
	var out []segment
	for rows.Next() {
		var s segment
		var key *string
		if err := rows.Scan(&s.idx, &s.startMS, &s.endMS, &s.src, &s.mt, &key); err != nil {
			return nil, fmt.Errorf("read segments of %s: %w", id, err)
		}
		if key == nil {
			return nil, step.Permanent(fmt.Errorf("segment %d of task %s has no synthesized audio", s.idx, id))
		}
		if *key != "" {
			if err := wire.CheckKey(*key, wire.KindTTS, id); err != nil {
				return nil, step.Permanent(fmt.Errorf("segment %d audio key: %w", s.idx, err))
			}
		}
		s.key = *key
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read segments of %s: %w", id, err)
	}
	return out, nil
}

// clips downloads the segments' clips one at a time and returns their
// slots in the timeline. Segments without a clip stay silent.
func (h *handler) clips(ctx context.Context, dir string, segs []segment) ([]media.Slot, error) {
	var slots []media.Slot
	for i, s := range segs {
		if s.key == "" {
			continue
		}
		p := clipPath(dir, s.idx)
		if err := h.download(ctx, s.key, p, h.cfg.MaxClipBytes, "MAX_CLIP_BYTES"); err != nil {
			return nil, err
		}
		d, err := wavDuration(p)
		if err != nil {
			return nil, step.Permanent(fmt.Errorf("clip %s: %w", s.key, err))
		}
		slot := media.Slot{Idx: s.idx, StartMS: s.startMS, EndMS: s.endMS, AudioMS: int(d.Milliseconds())}
		if i+1 < len(segs) {
			slot.NextStartMS = segs[i+1].startMS
		}
		slots = append(slots, slot)
	}
	return slots, nil
}

func clipPath(dir string, idx int) string {
	return filepath.Join(dir, fmt.Sprintf("seg-%06d.wav", idx))
}

// download fetches key into file, refusing a missing object; the download
// stops at limit (the value of setting) whatever the object's metadata says.
func (h *handler) download(ctx context.Context, key, file string, limit int64, setting string) error {
	if _, err := h.objects.Stat(ctx, key); errors.Is(err, blob.ErrNotFound) {
		return step.Permanent(fmt.Errorf("%s not found in storage", key))
	} else if err != nil {
		return fmt.Errorf("stat %s: %w", key, err)
	}
	if err := h.objects.GetFile(ctx, key, file, limit); err != nil {
		return worker.Limit(err, blob.ErrTooLarge, setting, limit)
	}
	return nil
}

// explain names MAX_VIDEO_SECONDS in an error that hit it.
func (h *handler) explain(err error) error {
	return worker.Limit(err, media.ErrTooLong, "MAX_VIDEO_SECONDS", h.cfg.MaxVideoSeconds)
}

// wavDuration reads the length of a WAV file from its header.
func wavDuration(file string) (time.Duration, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	r, err := media.NewWAVReader(f)
	if err != nil {
		return 0, err
	}
	return r.Duration(), nil
}

// writeSRT writes the segments' texts (picked by text) as SubRip.
func writeSRT(file string, segs []segment, text func(segment) string) error {
	cues := make([]media.Cue, 0, len(segs))
	for _, s := range segs {
		cues = append(cues, media.Cue{StartMS: s.startMS, EndMS: s.endMS, Text: text(s)})
	}
	f, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("write subtitles: %w", err)
	}
	if err := media.WriteSRT(f, cues); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write subtitles: %w", err)
	}
	return nil
}

// writeJSON writes the timing report.
func writeJSON(file string, r *media.TimingReport) error {
	f, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("write timing report: %w", err)
	}
	if err := r.WriteJSON(f); err != nil {
		f.Close()
		return fmt.Errorf("write timing report: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write timing report: %w", err)
	}
	return nil
}
