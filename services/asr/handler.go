package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/cores"
	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/pool"
	"github.com/dubflow/dubflow/pkg/speech"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/tenant"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/pkg/worker"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// transcriber recognises timed speech in a 16 kHz mono WAV file, whole or
// cut into chunks (speech.Chunker).
type transcriber interface {
	Transcribe(ctx context.Context, wavPath, language string) ([]speech.Segment, error)
	Whole(wavPath string) (bool, error)
	Split(ctx context.Context, wavPath string, fn func(speech.Chunk) error) error
	TranscribeChunk(ctx context.Context, ch speech.Chunk, language string) ([]speech.Segment, error)
}

// handler runs the asr step.
type handler struct {
	objects blob.Objects
	videos  copier // places a parent's video under its children's keys
	db      *pgxpool.Pool
	asr     transcriber
	// batchSize is the segments per translate message in force
	// (translate.batch_size).
	batchSize     func() int
	maxAudioBytes int64
	maxSeconds    int // MAX_VIDEO_SECONDS: the longest audio transcribed
}

// segmentStride spaces the segment numbers of consecutive chunks: chunk n
// numbers its segments from n*segmentStride, so that every chunk numbers
// its own without waiting for the ones before, and the numbers still follow
// the timeline. ASR_CHUNK_SECONDS (at most 600) keeps a chunk far below it.
const segmentStride = 1000

// taskInfo is what asr reads from the task's row.
type taskInfo struct {
	target, speaker                string
	sourceVideoKey, outputVideoKey string
	// targets are the languages of a parent task, one that dubs into several
	// at once (none for any other task): its asr spawns a child task per
	// language instead of translating (spawnChildren).
	targets []string
	// review are the stages the task stops at for a person's edits
	// (tasks.review): with the transcript's, asr translates nothing and
	// its completion holds the task in review (holdTranscript).
	review []string
}

// reviewsTranscript reports whether the task stops for review after asr.
func (t taskInfo) reviewsTranscript() bool { return slices.Contains(t.review, wire.ReviewTranscript) }

// Handle serves the three kinds of asr message (wire.ASR.Part): the whole
// audio (what extract_audio sends) is transcribed at once when it fits one chunk,
// else cut at silences into one message per chunk; a chunk is transcribed,
// its segments staged and its translate batches emitted at once; the merge,
// emitted by the chunk that completes the step, writes asr.json.
func (h *handler) Handle(ctx context.Context, msg *step.Message) error {
	var p wire.ASR
	if err := msg.Decode(&p); err != nil {
		return err
	}
	env := msg.Envelope
	if err := wire.CheckKey(p.AudioKey, wire.KindAudio, env.TaskID); err != nil {
		return fault.Permanent(fmt.Errorf("audio_key: %w", err))
	}
	if err := wire.CheckKey(p.OutputKey, wire.KindASR, env.TaskID); err != nil {
		return fault.Permanent(fmt.Errorf("output_key: %w", err))
	}
	var t taskInfo
	var project string
	var shared bool
	// The task, and its project's engine scope (tenant.EngineScope's, read
	// with it: one statement).
	err := h.db.QueryRow(ctx, `SELECT t.target_language, t.speaker_id, t.source_video_key, t.output_video_key, t.targets, t.review,
		t.project, coalesce(p.shared_engines, true)
		FROM tasks t LEFT JOIN projects p ON p.id = t.project WHERE t.id = $1`,
		env.TaskID).Scan(&t.target, &t.speaker, &t.sourceVideoKey, &t.outputVideoKey, &t.targets, &t.review, &project, &shared)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fault.Permanent(fmt.Errorf("task %s not found", env.TaskID))
	case err != nil:
		return fmt.Errorf("read task %s: %w", env.TaskID, err)
	case t.target == "":
		return fault.Permanent(fmt.Errorf("task %s has no target language", env.TaskID))
	}
	// The task's project's own engines first, the shared ones when it may.
	ctx = pool.ForProject(ctx, project, shared)
	switch {
	case p.Merge:
		return h.merge(ctx, msg, p, t)
	case p.Chunk != nil:
		return h.chunk(ctx, msg, p, t)
	}
	return h.whole(ctx, msg, p, t)
}

// whole serves the whole audio: transcribed at once when short, else cut
// into chunk messages.
func (h *handler) whole(ctx context.Context, msg *step.Message, p wire.ASR, t taskInfo) error {
	dir, wav, err := h.fetch(ctx, p.AudioKey)
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := h.checkLength(p.AudioKey, wav); err != nil {
		return err
	}
	if err := h.chargeShared(ctx, msg.Envelope.TaskID, p.AudioKey, wav); err != nil {
		return err
	}
	whole, err := h.asr.Whole(wav)
	if err != nil {
		return fault.Permanent(fmt.Errorf("audio %s: %w", p.AudioKey, err))
	}
	// The whole audio's message leaves its project's window (extract_audio
	// emits it windowed): the project's next held asr message goes in.
	msg.ReleaseWindow()
	if !whole {
		return h.fanOut(ctx, msg, p, wav)
	}
	segs, err := h.transcribe(h.turn(ctx, msg), wav, p.Language)
	if err != nil {
		return fmt.Errorf("transcribe %s: %w", p.AudioKey, err)
	}
	if err := h.store(ctx, msg, p.OutputKey, p.Language, segs, 0); err != nil {
		return err
	}
	stageSegments(msg, msg.Envelope.TaskID, segs, voicesOf(wav, 0, segs, msg.Log), 0, -1)
	if len(segs) == 0 {
		return finishWithoutSpeech(msg)
	}
	if t.reviewsTranscript() {
		return holdTranscript(msg)
	}
	if len(t.targets) > 0 {
		return h.spawnChildren(ctx, msg, p, t, segmentIDs(0, len(segs)))
	}
	return h.emitBatches(msg, p, t, segmentIDs(0, len(segs)), 0)
}

// fanOut cuts the audio at silences, stores each chunk beside it and emits
// one asr message per chunk, at most the window of them in the queue at
// once (ASR_CONCURRENCY).
func (h *handler) fanOut(ctx context.Context, msg *step.Message, p wire.ASR, wav string) error {
	var chunks []any
	err := h.asr.Split(ctx, wav, func(ch speech.Chunk) error {
		defer os.Remove(ch.Path)
		key := chunkKey(msg.Envelope.TaskID, ch.Index, "wav")
		if err := h.putFile(ctx, key, ch.Path, "audio/wav"); err != nil {
			return err
		}
		chunks = append(chunks, wire.ASR{AudioKey: key, Language: p.Language, OutputKey: p.OutputKey,
			Chunk: &wire.ASRChunk{Index: ch.Index, OffsetMS: ch.OffsetMS, LeadMS: ch.LeadMS}})
		return nil
	})
	if err != nil {
		return fmt.Errorf("cut %s into chunks: %w", p.AudioKey, err)
	}
	msg.Log.Info().Int("chunks", len(chunks)).Int("window", h.window()).Msg("audio cut into chunks")
	return msg.EmitWindowed(wire.StepASR, h.window(), chunks)
}

// chunk transcribes one chunk, stages its segments and their translate
// batches, lets the task's next chunk into the queue, and stages the merge
// for the chunk whose success completes the step.
func (h *handler) chunk(ctx context.Context, msg *step.Message, p wire.ASR, t taskInfo) error {
	dir, wav, err := h.fetch(ctx, p.AudioKey)
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ch := speech.Chunk{Index: p.Chunk.Index, Path: wav, OffsetMS: p.Chunk.OffsetMS, LeadMS: p.Chunk.LeadMS}
	segs, err := h.transcribeChunk(ctx, ch, p.Language)
	if err != nil {
		return err
	}
	base := p.Chunk.Index * segmentStride
	key := chunkKey(msg.Envelope.TaskID, p.Chunk.Index, "json")
	if err := h.store(ctx, msg, key, p.Language, segs, base); err != nil {
		return err
	}
	stageSegments(msg, msg.Envelope.TaskID, segs, voicesOf(wav, ch.OffsetMS, segs, msg.Log), base, base+segmentStride)
	// A parent's children translate once the merge has spawned them; a
	// task whose transcript is reviewed once it is approved.
	if len(t.targets) == 0 && !t.reviewsTranscript() {
		if err := h.emitBatches(msg, p, t, segmentIDs(base, len(segs)), cores.Usable()); err != nil {
			return err
		}
	}
	msg.ReleaseWindow()
	return msg.EmitWhenStepDone(wire.StepASR, wire.ASR{AudioKey: p.AudioKey, Language: p.Language,
		OutputKey: p.OutputKey, Merge: true})
}

// transcribeChunk recognises a chunk's speech, cleaned as transcribe does.
func (h *handler) transcribeChunk(ctx context.Context, ch speech.Chunk, language string) ([]speech.Segment, error) {
	silent, err := isSilent(ctx, ch.Path)
	if err != nil {
		return nil, err
	}
	if silent {
		return nil, nil
	}
	segs, err := h.asr.TranscribeChunk(ctx, ch, language)
	if err != nil {
		return nil, err
	}
	if len(segs) > segmentStride {
		return nil, fault.Permanent(fmt.Errorf("chunk %d: %d segments, at most %d", ch.Index, len(segs), segmentStride))
	}
	return clean(segs), nil
}

// transcribe returns the segments with text, in order. Digital silence is
// not sent to the recogniser at all.
func (h *handler) transcribe(ctx context.Context, wav, language string) ([]speech.Segment, error) {
	silent, err := isSilent(ctx, wav)
	if err != nil {
		return nil, err
	}
	if silent {
		return nil, nil
	}
	all, err := h.asr.Transcribe(ctx, wav, language)
	if err != nil {
		return nil, err
	}
	return clean(all), nil
}

// clean keeps the segments with text, their times made consistent.
func clean(all []speech.Segment) []speech.Segment {
	segs := all[:0]
	for _, s := range all {
		s.Text = strings.TrimSpace(s.Text)
		if s.Text == "" {
			continue
		}
		s.StartMS = max(s.StartMS, 0)
		s.EndMS = max(s.EndMS, s.StartMS)
		segs = append(segs, s)
	}
	return segs
}

// emitBatches stages one translate message per batch of the segments ids.
// With a window (a chunk of a long recording), at most window of the
// task's batches are in the translate queue at once (step.EmitWindowed):
// the others wait until earlier ones succeed, so that another task's batch
// finds a consumer instead of queueing behind a long video's; 0 sends them
// all at once (a short recording's few).
func (h *handler) emitBatches(msg *step.Message, p wire.ASR, t taskInfo, ids []string, window int) error {
	var batches []any
	size := h.batchSize()
	for batch := range slices.Chunk(ids, size) {
		batches = append(batches, wire.Translate{
			TaskID: msg.Envelope.TaskID, SegmentIDs: batch, SourceLanguage: p.Language, TargetLanguage: t.target,
			BatchSize: size,
		})
	}
	if window > 0 {
		return msg.EmitWindowed(wire.StepTranslate, window, batches)
	}
	for _, b := range batches {
		if err := msg.Emit(wire.StepTranslate, b); err != nil {
			return err
		}
	}
	return nil
}

// segmentIDs are the ids of n segments numbered from base.
func segmentIDs(base, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = wire.SegmentID(base + i)
	}
	return ids
}

// window is how many chunks of one task may be in the queue at once: the
// Chunker's Concurrency (ASR_CONCURRENCY), else the cores the worker sees.
func (h *handler) window() int {
	if c, ok := h.asr.(*speech.Chunker); ok && c.Concurrency > 0 {
		return c.Concurrency
	}
	return cores.Usable()
}

// chunkKey is where chunk n of a task's audio (ext wav) or its transcript
// (ext json) is stored.
func chunkKey(taskID uuid.UUID, n int, ext string) string {
	kind := wire.KindAudio
	if ext == "json" {
		kind = wire.KindASR
	}
	return fmt.Sprintf("%s/%s/chunks/%05d.%s", kind, taskID, n, ext)
}

// fetch downloads key into a fresh temporary folder; the caller removes dir.
func (h *handler) fetch(ctx context.Context, key string) (dir, wav string, err error) {
	dir, err = os.MkdirTemp("", worker.TempPrefix(service))
	if err != nil {
		return "", "", fmt.Errorf("make temp dir: %w", err)
	}
	wav = filepath.Join(dir, "audio.wav")
	if err := h.download(ctx, key, wav); err != nil {
		os.RemoveAll(dir)
		return "", "", err
	}
	return dir, wav, nil
}

// putFile stores a local file under key.
func (h *handler) putFile(ctx context.Context, key, path, contentType string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	if err := h.objects.Put(ctx, key, f, st.Size(), contentType); err != nil {
		return fmt.Errorf("store %s: %w", key, err)
	}
	return nil
}

// store writes the transcript of segs, numbered from base, under key.
func (h *handler) store(ctx context.Context, msg *step.Message, key, language string, segs []speech.Segment, base int) error {
	doc, err := json.Marshal(newTranscript(msg.Envelope.TaskID, language, segs, base))
	if err != nil {
		return fmt.Errorf("encode %s: %w", key, err)
	}
	if err := h.objects.Put(ctx, key, bytes.NewReader(doc), int64(len(doc)), "application/json"); err != nil {
		return fmt.Errorf("store %s: %w", key, err)
	}
	msg.Log.Info().Int("segments", len(segs)).Str("output_key", key).Msg("audio transcribed")
	return nil
}

// download fetches the audio into path.
func (h *handler) download(ctx context.Context, key, path string) error {
	info, err := h.objects.Stat(ctx, key)
	switch {
	case errors.Is(err, blob.ErrNotFound):
		return fault.Permanent(fmt.Errorf("audio %s not found in storage", key))
	case err != nil:
		return fmt.Errorf("stat %s: %w", key, err)
	case info.Size > h.maxAudioBytes:
		return fault.Permanent(fmt.Errorf("audio %s is %d bytes, limit %d (MAX_AUDIO_BYTES=%d)", key, info.Size, h.maxAudioBytes, h.maxAudioBytes))
	}
	if err := h.objects.GetFile(ctx, key, path, h.maxAudioBytes); err != nil {
		return worker.Limit(err, blob.ErrTooLarge, "MAX_AUDIO_BYTES", h.maxAudioBytes)
	}
	return nil
}

// checkLength bounds the recogniser's work: audio longer than
// MAX_VIDEO_SECONDS, counted from the samples present (not the header's
// claim), is refused.
func (h *handler) checkLength(key, wav string) error {
	d, err := media.WAVFileDuration(wav)
	if err != nil {
		return fault.Permanent(fmt.Errorf("audio %s: %w", key, err))
	}
	limit := time.Duration(h.maxSeconds) * time.Second
	return worker.Limit(media.CheckLength("audio "+key, d, limit), media.ErrTooLong, "MAX_VIDEO_SECONDS", h.maxSeconds)
}

// crowdNice is how much nicer a crowded project's transcriptions run
// (speech.Yielding): at 5 one gets about a third of the CPU of another
// project's while both want it, and all of it alone.
const crowdNice = 5

// turn is ctx for transcribing the task's whole audio: yielding the CPU
// when the task's project has more tasks queued or running than the
// machine has cores (tenant.Crowded), so that another project's task,
// taking its turn in the queue beside them, is not slowed as much by them
// on the same cores. A failed count leaves ctx as it is.
func (h *handler) turn(ctx context.Context, msg *step.Message) context.Context {
	crowded, err := tenant.Crowded(ctx, h.db, msg.Envelope.TaskID, cores.Usable())
	if err != nil {
		msg.Log.Warn().Err(err).Msg("count the project's tasks")
	}
	if !crowded {
		return ctx
	}
	return speech.Yielding(ctx, crowdNice)
}

// chargeShared charges the audio's minutes, once per task, to its
// project's daily use of the shared engines (tenant.ChargeShared): past the
// project's limit the step waits with reason project_quota until the next
// day, parked, never failed.
func (h *handler) chargeShared(ctx context.Context, id uuid.UUID, key, wav string) error {
	d, err := media.WAVFileDuration(wav)
	if err != nil {
		return fault.Permanent(fmt.Errorf("audio %s: %w", key, err))
	}
	return tenant.ChargeShared(ctx, h.db, id, d.Seconds(), time.Now())
}

// merge writes asr.json from the chunks' transcripts once every chunk has
// succeeded, and ends a task without speech. With speech, it stages the
// mux_video fan-in: the translate batches and their tts parts run while
// chunks are still transcribed, so this part may be the one that completes
// the last of asr, translate and tts.
func (h *handler) merge(ctx context.Context, msg *step.Message, p wire.ASR, t taskInfo) error {
	env := msg.Envelope
	parts, err := step.PartMessages(ctx, h.db, env.TaskID, wire.StepASR)
	if err != nil {
		return fmt.Errorf("count chunks of %s: %w", env.TaskID, err)
	}
	chunks := 0
	for _, part := range parts {
		if strings.HasPrefix(part.Part, "chunk-") {
			chunks++
		}
	}
	doc := transcript{TaskID: env.TaskID, Language: p.Language, Segments: []transcriptSegment{}}
	for n := range chunks {
		key := chunkKey(env.TaskID, n, "json")
		raw, err := h.objects.Get(ctx, key, h.maxAudioBytes)
		if err != nil {
			return fmt.Errorf("read %s: %w", key, err)
		}
		var part transcript
		if err := json.Unmarshal(raw, &part); err != nil {
			return fault.Permanent(fmt.Errorf("decode %s: %w", key, err))
		}
		doc.Segments = append(doc.Segments, part.Segments...)
	}
	body, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("encode %s: %w", p.OutputKey, err)
	}
	if err := h.objects.Put(ctx, p.OutputKey, bytes.NewReader(body), int64(len(body)), "application/json"); err != nil {
		return fmt.Errorf("store %s: %w", p.OutputKey, err)
	}
	msg.Log.Info().Int("chunks", chunks).Int("segments", len(doc.Segments)).Str("output_key", p.OutputKey).Msg("chunks merged")
	if len(doc.Segments) == 0 {
		return finishWithoutSpeech(msg)
	}
	if t.reviewsTranscript() {
		return holdTranscript(msg)
	}
	if slices.Contains(t.review, wire.ReviewTranslation) {
		// The translate batches emit no tts part: the last of them and of
		// asr's parts to commit holds the task in review of its translation
		// (the translate worker's holdTranslation), and this may be it.
		msg.Apply(task.Hold(task.RefOf(env), task.StageTranslation, wire.StepASR, wire.StepTranslate))
		return nil
	}
	if len(t.targets) > 0 {
		ids := make([]string, len(doc.Segments))
		for i, s := range doc.Segments {
			ids[i] = s.ID
		}
		return h.spawnChildren(ctx, msg, p, t, ids)
	}
	if err := h.emitTTSParts(ctx, msg, t); err != nil {
		return err
	}
	return emitMux(msg, t)
}

// emitMux stages, once every chunk is transcribed, the growing stream's
// message — the stream may now reach the end of the timeline, whose last
// stretch may hold no line for a tts part to end — and the mux_video
// fan-in over translate and tts.
func emitMux(msg *step.Message, t taskInfo) error {
	id := msg.Envelope.TaskID
	if err := msg.Emit(wire.StepMuxVideo, wire.StreamFor(id, t.sourceVideoKey, t.outputVideoKey, msg.Part)); err != nil {
		return err
	}
	return msg.EmitWhenStepsDone(wire.StepMuxVideo, wire.MuxFor(id, 0, t.sourceVideoKey, t.outputVideoKey),
		wire.StepTranslate, wire.StepTTS)
}

// emitTTSParts stages, for each translate batch of the task, its tts part
// (the batch's segments) if the batch has succeeded by the time this part
// commits and the part was not emitted before. A batch emits its own tts
// part with its success; this covers batches that finished before an
// upgrade under the earlier rule, where a batch finishing before asr left
// its part to the asr merge. Exactly once either way (step.EmitWhenPartDone).
func (h *handler) emitTTSParts(ctx context.Context, msg *step.Message, t taskInfo) error {
	env := msg.Envelope
	batches, err := step.PartMessages(ctx, h.db, env.TaskID, wire.StepTranslate)
	if err != nil {
		return fmt.Errorf("read translate batches of %s: %w", env.TaskID, err)
	}
	for _, b := range batches {
		var p wire.Translate
		if b.Message == nil {
			return fault.Permanent(fmt.Errorf("translate batch %q of %s has no message", b.Part, env.TaskID))
		}
		sent, err := wire.Decode(b.Message)
		if err == nil {
			err = sent.UnmarshalPayload(&p)
		}
		if err != nil {
			return fault.Permanent(fmt.Errorf("translate batch %q of %s: %w", b.Part, env.TaskID, err))
		}
		tts := wire.TTS{TaskID: env.TaskID, SpeakerID: t.speaker, SegmentIDs: p.SegmentIDs}
		if err := msg.EmitWhenPartDone(wire.StepTTS, tts, wire.StepTranslate, b.Part); err != nil {
			return err
		}
	}
	return nil
}

// finishWithoutSpeech ends a task whose audio holds no speech: it fails
// with "asr: no speech found in the audio" (task.FailNoSpeech) in the
// step's own commit — there is nothing to dub, and a task done without a
// video would promise one. The asr step itself succeeded: nothing is
// dead-lettered, nothing retried.
func finishWithoutSpeech(msg *step.Message) error {
	msg.Apply(task.FailNoSpeech(task.RefOf(msg.Envelope)))
	msg.Log.Info().Msg("no speech in the audio; task failed")
	return nil
}

// holdTranscript stops a task whose transcript is reviewed in the status
// review (task.Hold), in the step's own commit: its lines wait for a
// person's edits, and the person's approval sends its translate batches
// (pkg/dub's Approve). Nothing else is emitted: no translate batch, no
// mux_video fan-in.
func holdTranscript(msg *step.Message) error {
	msg.Apply(task.Hold(task.RefOf(msg.Envelope), task.StageTranscript))
	msg.Log.Info().Msg("transcript waits for review")
	return nil
}
