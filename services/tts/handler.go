package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/dubflow/dubflow/pkg/compensation"
	"github.com/dubflow/dubflow/pkg/dub"
	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/pool"
	seg "github.com/dubflow/dubflow/pkg/segment"
	"github.com/dubflow/dubflow/pkg/speech"
	"github.com/dubflow/dubflow/pkg/step"
	lifecycle "github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/tenant"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"
)

// synthesizer speaks one line.
type synthesizer interface {
	Synthesize(ctx context.Context, req speech.SynthesisRequest) (*speech.Audio, error)
}

// objects is the part of the object store tts uses.
type objects interface {
	Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error
}

// settings are the batch, concurrency and retry settings of one run.
type settings struct {
	batchSize, concurrency, maxRetries int
	retryDelay                         time.Duration
	// maxRate bounds the engine's own speed-up (TTS_MAX_RATE).
	maxRate float64
	// maxRequeues bounds the re-drives of a task's synthesis
	// (TTS_MAX_REQUEUES).
	maxRequeues int
}

// override applies a message's settings over the configured ones.
func (s settings) override(p wire.TTS) settings {
	if p.BatchSize > 0 {
		s.batchSize = p.BatchSize
	}
	if p.MaxConcurrency > 0 {
		s.concurrency = p.MaxConcurrency
	}
	if p.MaxRetries != nil {
		s.maxRetries = *p.MaxRetries
	}
	if p.RetryDelaySec != nil {
		s.retryDelay = time.Duration(*p.RetryDelaySec * float64(time.Second))
	}
	return s
}

// handler runs the tts step.
type handler struct {
	db       *pgxpool.Pool
	objects  objects
	tts      synthesizer
	defaults settings
	voicing  voicing
	// voices judges a task's speaker by the engine's voices (nil: not
	// judged).
	voices *voiceList
}

// task is what tts reads from a task's row.
type task struct {
	id                             uuid.UUID
	language, speaker              string
	sourceVideoKey, outputVideoKey string
	// version is the output version being built (wire.TTS.Version).
	version int
	// long says the task's asr was cut into chunks: its tts parts were
	// emitted in a window (see the translate worker) and each part that
	// ends lets the next one in.
	long bool
}

// segment is one segment still without audio, with the slot its speech
// may fill: up to the next segment's start (its end for the last one).
type segment struct {
	idx, startMS, endMS int
	slotMS              int
	text                *string
	// voice is the voice chosen for the segment's speaker ("": the task's).
	voice string
}

// failure is a segment whose synthesis failed for good in this run.
type failure struct {
	idx int
	err error
}

// segmentError is a segment's synthesis failed for good after tries tries.
type segmentError struct {
	idx, tries int
	err        error
}

func (e *segmentError) Error() string {
	return fmt.Sprintf("segment %d failed after %s: %v", e.idx, plural(e.tries, "try", "tries"), e.err)
}

func (e *segmentError) Unwrap() error { return e.err }

// plural writes n with its noun.
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// Handle synthesizes every segment without audio — of the part, for a
// message with segment ids (one per translate batch, see wire.TTS) — then
// emits mux_video (a part: stages the fan-in), or parks the step with
// compensation messages for the segments that still fail.
func (h *handler) Handle(ctx context.Context, msg *step.Message) error {
	var p wire.TTS
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
	set := h.defaults.override(p)
	t, err := h.task(ctx, env.TaskID)
	if err != nil {
		return err
	}
	if p.SpeakerID != "" {
		t.speaker = p.SpeakerID
	}
	if err := h.voices.check(ctx, t.speaker); err != nil {
		// An outside publisher's (or an older door's) speaker that no voice
		// answers to: no retry, no requeue can help; an operator retries the
		// task with another speaker.
		return fault.Permanent(err)
	}
	t.version = p.Version
	only, err := wire.SegmentIndexes(p.SegmentIDs)
	if err != nil {
		return fault.Permanent(err)
	}
	if err := h.assignSpeakers(ctx, msg, t, only); err != nil {
		return err
	}
	done, failed, err := h.synthesizeAll(ctx, t, set, msg, only)
	if err != nil {
		return err
	}
	if only != nil && t.long {
		// Parked or done, the part no longer waits for a consumer.
		msg.ReleaseWindow()
	}
	if len(failed) > 0 {
		return h.compensate(ctx, msg, t, failed, set)
	}
	if only != nil {
		return h.finishPart(ctx, msg, t, only, done)
	}
	return h.finish(ctx, msg, t, done)
}

// finishPart checks that every segment of the part has audio, then stages
// the fan-in of mux_video: the tts part whose success completes the last
// of asr, translate and tts emits it, exactly once. The task is not resumed
// here: a part that parked (compensation) keeps it compensating until
// tts_requeue re-drives the whole task.
func (h *handler) finishPart(ctx context.Context, msg *step.Message, t task, only []int32, done int) error {
	var missing, found int
	if err := h.db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE tts_audio_key IS NULL), count(*) FROM segments
		WHERE task_id = $1 AND idx = ANY($2)`, t.id, only).Scan(&missing, &found); err != nil {
		return fmt.Errorf("count segments without audio: %w", err)
	}
	if found != len(only) {
		return fault.Permanent(fmt.Errorf("%d of the part's %d segments of task %s not found", len(only)-found, len(only), t.id))
	}
	if missing > 0 {
		return fmt.Errorf("%d segments of the part of task %s still without audio", missing, t.id)
	}
	msg.Log.Info().Int("synthesized", done).Int("segments", len(only)).Msg("every segment of the part has audio")
	if t.long && t.version <= 1 {
		// More of a long task's timeline may be final: the growing
		// stream's next batch (mux_video, part stream/<this part>).
		if err := msg.Emit(wire.StepMuxVideo, wire.StreamFor(t.id, t.sourceVideoKey, t.outputVideoKey, msg.Part)); err != nil {
			return err
		}
	}
	return msg.EmitWhenStepsDone(wire.StepMuxVideo, h.muxPayload(t), wire.StepASR, wire.StepTranslate)
}

// muxPayload is the mux_video message of the version being built.
func (h *handler) muxPayload(t task) wire.MuxVideo {
	return wire.MuxFor(t.id, t.version, t.sourceVideoKey, t.outputVideoKey)
}

// synthesizeAll synthesizes every segment of t without audio (of only, when
// not nil: a part), in batches, and returns how many it did and which
// failed for good.
func (h *handler) synthesizeAll(ctx context.Context, t task, set settings, msg *step.Message, only []int32) (int, []failure, error) {
	var (
		mu       sync.Mutex
		failed   []failure
		done     int
		lastIdx  = -1
		firstRun = true
	)
	for {
		segs, err := h.pending(ctx, t.id, lastIdx, set.batchSize, only)
		if err != nil {
			return done, failed, err
		}
		if len(segs) == 0 {
			break
		}
		if firstRun {
			msg.Log.Info().Int("batch_size", set.batchSize).Int("max_concurrency", set.concurrency).
				Int("max_retries", set.maxRetries).Dur("retry_delay", set.retryDelay).Msg("synthesizing segments")
			firstRun = false
		}
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(set.concurrency)
		for _, s := range segs {
			g.Go(func() error {
				ferr, err := h.segment(gctx, t, s, set, msg)
				mu.Lock()
				defer mu.Unlock()
				if ferr != nil {
					failed = append(failed, failure{idx: s.idx, err: ferr})
				} else if err == nil {
					done++
				}
				return err
			})
		}
		if err := g.Wait(); err != nil {
			return done, failed, err
		}
		lastIdx = segs[len(segs)-1].idx
	}
	return done, failed, nil
}

// finish checks that every segment has audio, then emits the mux_video
// message of the version being built.
func (h *handler) finish(ctx context.Context, msg *step.Message, t task, done int) error {
	var missing int
	if err := h.db.QueryRow(ctx, `SELECT count(*) FROM segments WHERE task_id = $1 AND tts_audio_key IS NULL`, t.id).Scan(&missing); err != nil {
		return fmt.Errorf("count segments without audio: %w", err)
	}
	if missing > 0 {
		return fmt.Errorf("%d segments of task %s still without audio", missing, t.id)
	}
	msg.Log.Info().Int("synthesized", done).Msg("every segment has audio")
	msg.Apply(lifecycle.Resume(lifecycle.RefOf(msg.Envelope)))
	if t.version <= 1 {
		msg.CoverParts(t.id, "covered by the whole-task tts run")
	}
	return msg.Emit(wire.StepMuxVideo, h.muxPayload(t))
}

// task reads the task's language, speaker and keys.
func (h *handler) task(ctx context.Context, id uuid.UUID) (task, error) {
	t := task{id: id}
	err := h.db.QueryRow(ctx, `SELECT target_language, speaker_id, source_video_key, output_video_key, `+
		step.FannedOutSQL("$1", "'"+wire.StepASR+"'")+` FROM tasks WHERE id = $1`,
		id).Scan(&t.language, &t.speaker, &t.sourceVideoKey, &t.outputVideoKey, &t.long)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return t, fault.Permanent(fmt.Errorf("task %s not found", id))
	case err != nil:
		return t, fmt.Errorf("read task %s: %w", id, err)
	}
	return t, nil
}

// pending returns up to limit segments after idx without audio, in order
// (of only, when not nil).
func (h *handler) pending(ctx context.Context, id uuid.UUID, after, limit int, only []int32) ([]segment, error) {
	return dub.ReadSegments(ctx, h.db, id, func(r pgx.CollectableRow) (segment, error) {
		var s segment
		var next *int
		err := r.Scan(&s.idx, &s.startMS, &s.endMS, &next, &s.text, &s.voice)
		s.slotMS = s.endMS - s.startMS
		if next != nil && *next > s.endMS {
			s.slotMS = *next - s.startMS
		}
		return s, err
	}, `SELECT idx, start_ms, end_ms, next_start, mt_text, voice FROM (
		    SELECT idx, start_ms, end_ms, mt_text, tts_audio_key, voice,
		           lead(start_ms) OVER (ORDER BY idx) AS next_start
		      FROM segments WHERE task_id = $1) s
		WHERE tts_audio_key IS NULL AND idx > $2 AND ($4::int[] IS NULL OR idx = ANY($4))
		ORDER BY idx LIMIT $3`, after, limit, only)
}

// segment synthesizes one segment with retries, stores the clip and
// records it on the row at once, so that progress survives a crash. It
// returns ferr when the segment failed for good (to compensate), err for
// trouble that stops the whole run.
func (h *handler) segment(ctx context.Context, t task, s segment, set settings, msg *step.Message) (ferr, err error) {
	if s.text == nil {
		return nil, fault.Permanent(fmt.Errorf("segment %d of task %s has no translation", s.idx, t.id))
	}
	if *s.text == "" {
		// Nothing to say: mux_video plays silence in its slot.
		if err := seg.Skipped(ctx, h.db, t.id, s.idx); err != nil {
			return nil, fmt.Errorf("record segment %d: %w", s.idx, err)
		}
		return nil, nil
	}
	// The engine's rate aims at the source line itself, within the bound;
	// mux_video then stretches, then borrows the silence after the line.
	req := speech.SynthesisRequest{Text: *s.text, Language: t.language, Voice: firstNonEmpty(s.voice, t.speaker),
		TargetDuration: time.Duration(s.endMS-s.startMS) * time.Millisecond, MaxRate: set.maxRate}
	audio, ferr, err := h.synthesize(ctx, req, s.idx, set, msg)
	if ferr != nil || err != nil {
		return ferr, err
	}
	return nil, h.store(ctx, t, s, req, audio)
}

// synthesize speaks one segment, trying again up to set.maxRetries times:
// ferr is the segment's own failure (the step goes on without it), err
// one that stops the step.
func (h *handler) synthesize(ctx context.Context, req speech.SynthesisRequest, idx int, set settings, msg *step.Message) (audio *speech.Audio, ferr, err error) {
	for try := 1; ; try++ {
		audio, err = h.tts.Synthesize(ctx, req)
		if err == nil {
			return audio, nil, nil
		}
		if _, _, waiting := fault.WaitOf(err); waiting || ctx.Err() != nil {
			// No engine of the pool can serve now: the step waits and is
			// re-offered; the segments done so far are kept.
			return nil, nil, fmt.Errorf("synthesize segment %d: %w", idx, err)
		}
		if try > set.maxRetries || fault.IsPermanent(err) {
			msg.Log.Warn().Err(err).Int("segment", idx).Int("tries", try).Msg("segment synthesis failed")
			return nil, &segmentError{idx: idx, tries: try, err: err}, nil
		}
		delay := set.retryDelay
		if hint, ok := fault.RetryAfterHint(err); ok && hint > delay {
			delay = hint
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("synthesize segment %d: %w", idx, ctx.Err())
		}
	}
}

// store keeps a segment's audio and records it with its parameters.
func (h *handler) store(ctx context.Context, t task, s segment, req speech.SynthesisRequest, audio *speech.Audio) error {
	params := map[string]any{}
	for k, v := range audio.Params {
		params[k] = v
	}
	params["slot_ms"] = s.slotMS
	pj, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("encode params of segment %d: %w", s.idx, err)
	}
	key := wire.SegmentVersionKey(t.id, s.idx, t.version)
	if err := h.objects.Put(ctx, key, bytes.NewReader(audio.WAV), int64(len(audio.WAV)), "audio/wav"); err != nil {
		return fmt.Errorf("store %s: %w", key, err)
	}
	if err := seg.Synthesised(ctx, h.db, t.id, s.idx, key, pj, usedVoice(req, audio)); err != nil {
		return fmt.Errorf("record segment %d: %w", s.idx, err)
	}
	return nil
}

// compensate stages, for each failed segment, its failure record and its
// compensation message, sets the task compensating and parks the step:
// the task waits for tts_requeue instead of muxing a hole. A task whose
// synthesis was re-driven set.maxRequeues times since an operator last
// retried it fails instead, with the reason.
func (h *handler) compensate(ctx context.Context, msg *step.Message, t task, failed []failure, set settings) error {
	slices.SortFunc(failed, func(a, b failure) int { return a.idx - b.idx })
	requeues, err := compensation.Requeues(ctx, h.db, t.id)
	if err != nil {
		return err
	}
	what := fmt.Sprintf("speech synthesis failed for %s; first: %v", plural(len(failed), "segment", "segments"), failed[0].err)
	if requeues >= set.maxRequeues {
		return fault.Permanent(fmt.Errorf("%s, and still after %s (TTS_MAX_REQUEUES %d); retry the task with another speaker or cancel it",
			what, plural(requeues, "requeue", "requeues"), set.maxRequeues))
	}
	now := time.Now()
	for _, f := range failed {
		st := seg.SynthesisFailed(t.id, f.idx, f.err.Error())
		msg.Exec(st.SQL, st.Args...)
		body, err := wire.NewCompensation(t.id, f.idx, f.err, msg.Envelope.TraceID, now).Marshal()
		if err != nil {
			return fmt.Errorf("encode compensation of segment %d: %w", f.idx, err)
		}
		msg.Publish(wire.Exchange, wire.RoutingKeyTTSCompensation, body)
	}
	reason := fmt.Sprintf("tts: %s (requeues left: %d)", what, set.maxRequeues-requeues)
	msg.Apply(lifecycle.Compensate(lifecycle.RefOf(msg.Envelope), reason))
	return fault.Park(errors.New(reason))
}

func firstNonEmpty(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}

// usedVoice is the voice a clip was spoken with: the engine's own name for
// it when it reports one, else the one asked for.
func usedVoice(req speech.SynthesisRequest, audio *speech.Audio) string {
	if v, ok := audio.Params["voice"].(string); ok && v != "" {
		return v
	}
	return req.Voice
}
