package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/speaker"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/pkg/worker"
	"github.com/jackc/pgx/v5"
)

// voicing is how tts gives speakers voices.
type voicing struct {
	// maxSpeakers bounds the speakers told apart (1: one voice for all).
	maxSpeakers int
	voices      speaker.Voices
	// maxAudioBytes bounds the source audio downloaded.
	maxAudioBytes int64
}

// assignSpeakers finds the speakers of a task whose segments have none yet,
// from the task's extracted audio, and records each segment's speaker and
// voice in one statement (all or nothing, so a crash leaves none). The
// task's own voice (speaker_id) goes to the first speaker. Audio that is
// missing or unreadable leaves one speaker for all.
//
// The tts parts of a task start together (one per translate batch): the
// first one finds the speakers, under a lock of the task held in a
// transaction, and the others wait for it and find them recorded, so the
// audio is downloaded and measured once.
func (h *handler) assignSpeakers(ctx context.Context, msg *step.Message, t task) error {
	var assigned bool
	if err := h.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM segments WHERE task_id = $1 AND speaker <> '')`, t.id).Scan(&assigned); err != nil {
		return fmt.Errorf("read speakers of %s: %w", t.id, err)
	}
	if assigned {
		return nil
	}
	return pgx.BeginFunc(ctx, h.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('speakers/' || $1::text, 0))`, t.id); err != nil {
			return fmt.Errorf("lock speakers of %s: %w", t.id, err)
		}
		return h.assignSpeakersTx(ctx, tx, msg, t)
	})
}

// assignSpeakersTx is assignSpeakers inside tx, under the task's lock.
func (h *handler) assignSpeakersTx(ctx context.Context, tx pgx.Tx, msg *step.Message, t task) error {
	rows, err := tx.Query(ctx, `SELECT idx, start_ms, end_ms FROM segments WHERE task_id = $1
		AND NOT EXISTS (SELECT 1 FROM segments s WHERE s.task_id = $1 AND s.speaker <> '') ORDER BY idx`, t.id)
	if err != nil {
		return fmt.Errorf("read segments of %s: %w", t.id, err)
	}
	var idx []int32
	var spans []speaker.Span
	for rows.Next() {
		var i int32
		var s speaker.Span
		if err := rows.Scan(&i, &s.StartMS, &s.EndMS); err != nil {
			rows.Close()
			return fmt.Errorf("read segments of %s: %w", t.id, err)
		}
		idx, spans = append(idx, i), append(spans, s)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(spans) == 0 {
		return err
	}
	voices, err := h.measure(ctx, t, spans)
	if err != nil {
		if ctx.Err() != nil || fault.IsUnavailable(err) {
			return err
		}
		msg.Log.Warn().Err(err).Msg("speaker turns unknown: one voice for every segment")
	}
	turns := speaker.Cluster(voices, max(1, h.voicing.maxSpeakers))
	byName := speaker.Assign(turns, h.voicing.voices, strings.ToLower(t.language), t.speaker)
	names, chosen := make([]string, len(turns)), make([]string, len(turns))
	for i, tr := range turns {
		names[i], chosen[i] = tr.Speaker, byName[tr.Speaker]
	}
	msg.Log.Info().Int("speakers", len(byName)).Interface("voices", byName).Msg("speakers found")
	if _, err := tx.Exec(ctx, `UPDATE segments AS s SET speaker = v.speaker, voice = v.voice
		FROM unnest($2::int[], $3::text[], $4::text[]) AS v(idx, speaker, voice)
		WHERE s.task_id = $1 AND s.idx = v.idx AND s.speaker = ''`, t.id, idx, names, chosen); err != nil {
		return fmt.Errorf("record speakers of %s: %w", t.id, err)
	}
	return nil
}

// measure downloads the task's extracted audio and measures each span's
// voice. With an error it still returns one (unknown) voice per span.
func (h *handler) measure(ctx context.Context, t task, spans []speaker.Span) ([]speaker.Voice, error) {
	unknown := make([]speaker.Voice, len(spans))
	if h.voicing.maxSpeakers <= 1 {
		return unknown, nil
	}
	dir, err := os.MkdirTemp("", worker.TempPrefix(service))
	if err != nil {
		return unknown, fmt.Errorf("make temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "source.wav")
	key := wire.DefaultKeys(t.id).SourceAudio
	if err := h.objects.GetFile(ctx, key, file, h.voicing.maxAudioBytes); err != nil {
		return unknown, fmt.Errorf("download %s: %w", key, err)
	}
	f, err := os.Open(file)
	if err != nil {
		return unknown, err
	}
	defer f.Close()
	v, err := speaker.Measure(f, spans)
	if err != nil {
		return unknown, fmt.Errorf("measure %s: %w", key, err)
	}
	return v, nil
}
