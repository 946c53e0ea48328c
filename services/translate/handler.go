package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/dubflow/dubflow/pkg/cores"
	"github.com/dubflow/dubflow/pkg/dub"
	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/pool"
	"github.com/dubflow/dubflow/pkg/segment"
	"github.com/dubflow/dubflow/pkg/speech"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/tenant"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// handler runs the translate step for one batch of segments.
type handler struct {
	db *pgxpool.Pool
	// batcher is the configured translator; a message's batch_size, else
	// batchSize (the run-time setting translate.batch_size), sets its
	// BatchSize.
	batcher   speech.Batcher
	batchSize func() int
}

// Handle translates the batch's untranslated segments, stages their
// mt_text, and emits the batch's tts part (the same segments) — or, for a
// task whose translation is reviewed, holds it in review once its last
// batch is translated (holdTranslation).
func (h *handler) Handle(ctx context.Context, msg *step.Message) error {
	var p wire.Translate
	if err := msg.Decode(&p); err != nil {
		return err
	}
	env := msg.Envelope
	// The task's project's own engines first, the shared ones when it may.
	project, shared, err := tenant.EngineScope(ctx, h.db, env.TaskID)
	if err != nil {
		return err
	}
	ctx = pool.ForProject(ctx, project, shared)
	want, err := wire.SegmentIndexes(p.SegmentIDs)
	if err != nil {
		return fault.Permanent(err)
	}
	var speaker string
	var long bool
	var review []string
	err = h.db.QueryRow(ctx, `SELECT speaker_id, review, `+step.FannedOutSQL("$1", "'"+wire.StepASR+"'")+
		` FROM tasks WHERE id = $1`, env.TaskID).Scan(&speaker, &review, &long)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fault.Permanent(fmt.Errorf("task %s not found", env.TaskID))
	case err != nil:
		return fmt.Errorf("read task %s: %w", env.TaskID, err)
	}

	idx, texts, err := h.pending(ctx, env, want)
	if err != nil {
		return err
	}
	if len(texts) > 0 {
		out, err := h.translate(ctx, env, p, texts)
		if err != nil {
			return err
		}
		st := segment.Translated(env.TaskID, idx, out)
		msg.Exec(st.SQL, st.Args...)
	}
	msg.Log.Info().Int("segments", len(want)).Int("translated", len(texts)).Msg("batch translated")
	if p.Revision == 0 && slices.Contains(review, wire.ReviewTranslation) {
		holdTranslation(msg, long)
		return nil
	}
	// The batch's own tts part (the same segments), emitted with this
	// success: synthesis of these segments starts while later chunks are
	// still transcribed and translated (tts tells their speakers apart
	// from the segments known by then). The tts part or the asr merge that
	// completes the last of asr, translate and tts emits mux_video.
	// A long recording's batches and tts parts take turns with other
	// tasks' (emitTTS).
	tts := wire.TTS{TaskID: env.TaskID, SpeakerID: speaker, SegmentIDs: p.SegmentIDs}
	if err := emitTTS(msg, tts, long); err != nil {
		return fault.Permanent(err)
	}
	return nil
}

// translate translates texts with the task's engine, one translation a
// text, trimmed.
func (h *handler) translate(ctx context.Context, env *wire.Envelope, p wire.Translate, texts []string) ([]string, error) {
	b, err := h.translator(ctx, env, p)
	if err != nil {
		return nil, err
	}
	out, err := b.Translate(ctx, texts, p.SourceLanguage, p.TargetLanguage)
	if err != nil {
		return nil, fmt.Errorf("translate %d segments %s→%s: %w", len(texts), p.SourceLanguage, p.TargetLanguage, err)
	}
	if len(out) != len(texts) {
		return nil, fmt.Errorf("translate: %d translations for %d segments: %w", len(out), len(texts), speech.ErrCountMismatch)
	}
	for i := range out {
		// An empty translation stays an explicit '' (nothing to say),
		// never NULL (not translated yet).
		out[i] = strings.TrimSpace(out[i])
	}
	return out, nil
}

// emitTTS stages the batch's tts part. For a long recording (its asr cut
// into chunks, which emitted its batches in a window) the batch lets the
// task's next held batch in, and its tts part joins the task's window of
// tts parts: at most cores.Usable of them in the tts queue at once, so
// that another task's tts message finds a consumer instead of queueing
// behind a long video's parts.
func emitTTS(msg *step.Message, tts wire.TTS, long bool) error {
	if !long {
		return msg.Emit(wire.StepTTS, tts)
	}
	msg.ReleaseWindow()
	return msg.EmitWindowed(wire.StepTTS, cores.Usable(), []any{tts})
}

// translator is the configured Batcher with the message's batch size and
// the task's glossary, if it has one.
func (h *handler) translator(ctx context.Context, env *wire.Envelope, p wire.Translate) (speech.Batcher, error) {
	b := h.batcher
	b.BatchSize = h.batchSize()
	if p.BatchSize > 0 {
		b.BatchSize = p.BatchSize
	}
	glossary, err := dub.Glossary(ctx, h.db, env.TaskID)
	if err != nil {
		return b, err
	}
	if len(glossary) > 0 {
		terms := make([]speech.Term, len(glossary))
		for i, t := range glossary {
			terms[i] = speech.Term{Source: t.Source, Target: t.Target}
		}
		b.Engine = speech.WithGlossary(b.Engine, terms)
	}
	return b, nil
}

// pending returns the batch's segments that have no translation yet, in
// order. A segment of the batch that does not exist is a permanent error.
func (h *handler) pending(ctx context.Context, env *wire.Envelope, want []int32) ([]int32, []string, error) {
	rows, err := h.db.Query(ctx, `SELECT idx, src_text, mt_text IS NULL FROM segments
		WHERE task_id = $1 AND idx = ANY($2) ORDER BY idx`, env.TaskID, want)
	if err != nil {
		return nil, nil, fmt.Errorf("read segments of %s: %w", env.TaskID, err)
	}
	defer rows.Close()
	var idx []int32
	var texts []string
	found := make(map[int32]bool, len(want))
	for rows.Next() {
		var i int32
		var text string
		var missing bool
		if err := rows.Scan(&i, &text, &missing); err != nil {
			return nil, nil, fmt.Errorf("read segments of %s: %w", env.TaskID, err)
		}
		found[i] = true
		if missing {
			idx, texts = append(idx, i), append(texts, text)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("read segments of %s: %w", env.TaskID, err)
	}
	for _, i := range want {
		if !found[i] {
			return nil, nil, fault.Permanent(fmt.Errorf("segment %s of task %s not found", wire.SegmentID(int(i)), env.TaskID))
		}
	}
	return idx, texts, nil
}

// holdTranslation stages, for a batch of a task whose translation is
// reviewed (revision 0: not sent again after an approval), no tts part:
// the part whose success completes the last of asr and translate — this
// batch, or a long recording's asr merge — holds the task in review
// (task.Hold, guarded by both steps' completion as seen under the task's
// review lock, so that of parts finishing at once exactly the last one
// holds it, and never while chunks are still transcribed). The person's
// approval sends the batches again as revision 1, which translate the
// lines left without a translation and emit their tts parts. A long
// recording's batch still lets the task's next held batch in.
func holdTranslation(msg *step.Message, long bool) {
	if long {
		msg.ReleaseWindow()
	}
	msg.Apply(task.Hold(task.RefOf(msg.Envelope), task.StageTranslation, wire.StepASR, wire.StepTranslate))
}
