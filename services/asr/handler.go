package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/speech"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/pkg/worker"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// objects is the part of the object store asr uses.
type objects interface {
	Stat(ctx context.Context, key string) (blob.Info, error)
	GetFile(ctx context.Context, key, path string, maxBytes int64) error
	Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error
}

// transcriber recognises timed speech in a 16 kHz mono WAV file.
type transcriber interface {
	Transcribe(ctx context.Context, wavPath, language string) ([]speech.Segment, error)
}

// handler runs the asr step.
type handler struct {
	objects       objects
	db            *pgxpool.Pool
	asr           transcriber
	batchSize     int
	maxAudioBytes int64
	maxSeconds    int // MAX_VIDEO_SECONDS: the longest audio transcribed
}

// Handle transcribes the audio, stores asr.json, stages the segments and
// the translate batches (or, without speech, finishes the task).
func (h *handler) Handle(ctx context.Context, msg *step.Message) error {
	var p wire.ASR
	if err := msg.Decode(&p); err != nil {
		return err
	}
	env := msg.Envelope
	if err := wire.CheckKey(p.AudioKey, wire.KindAudio, env.TaskID); err != nil {
		return step.Permanent(fmt.Errorf("audio_key: %w", err))
	}
	if err := wire.CheckKey(p.OutputKey, wire.KindASR, env.TaskID); err != nil {
		return step.Permanent(fmt.Errorf("output_key: %w", err))
	}
	var target string
	err := h.db.QueryRow(ctx, `SELECT target_language FROM tasks WHERE id = $1`, env.TaskID).Scan(&target)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return step.Permanent(fmt.Errorf("task %s not found", env.TaskID))
	case err != nil:
		return fmt.Errorf("read task %s: %w", env.TaskID, err)
	case target == "":
		return step.Permanent(fmt.Errorf("task %s has no target language", env.TaskID))
	}

	dir, err := os.MkdirTemp("", worker.TempPrefix(service))
	if err != nil {
		return fmt.Errorf("make temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	wav := filepath.Join(dir, "source.wav")
	if err := h.download(ctx, p.AudioKey, wav); err != nil {
		return err
	}
	if err := h.checkLength(p.AudioKey, wav); err != nil {
		return err
	}
	segs, err := h.transcribe(ctx, wav, p.Language)
	if err != nil {
		return fmt.Errorf("transcribe %s: %w", p.AudioKey, err)
	}
	doc, err := json.Marshal(newTranscript(env.TaskID, p.Language, segs))
	if err != nil {
		return fmt.Errorf("encode %s: %w", p.OutputKey, err)
	}
	if err := h.objects.Put(ctx, p.OutputKey, bytes.NewReader(doc), int64(len(doc)), "application/json"); err != nil {
		return fmt.Errorf("store %s: %w", p.OutputKey, err)
	}
	msg.Log.Info().Int("segments", len(segs)).Str("output_key", p.OutputKey).Msg("audio transcribed")

	stageSegments(msg, env.TaskID, segs)
	if len(segs) == 0 {
		return finishWithoutSpeech(msg)
	}
	for lo := 0; lo < len(segs); lo += h.batchSize {
		hi := min(lo+h.batchSize, len(segs))
		ids := make([]string, 0, hi-lo)
		for i := lo; i < hi; i++ {
			ids = append(ids, wire.SegmentID(i))
		}
		err := msg.Emit(wire.StepTranslate, wire.Translate{
			TaskID: env.TaskID, SegmentIDs: ids, SourceLanguage: p.Language, TargetLanguage: target,
			BatchSize: h.batchSize,
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// transcribe returns the segments with text, in order. Digital silence is
// not sent to the recogniser at all.
func (h *handler) transcribe(ctx context.Context, wav, language string) ([]speech.Segment, error) {
	silent, err := media.IsSilent(ctx, wav)
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
	return segs, nil
}

// download fetches the audio into path.
func (h *handler) download(ctx context.Context, key, path string) error {
	info, err := h.objects.Stat(ctx, key)
	switch {
	case errors.Is(err, blob.ErrNotFound):
		return step.Permanent(fmt.Errorf("audio %s not found in storage", key))
	case err != nil:
		return fmt.Errorf("stat %s: %w", key, err)
	case info.Size > h.maxAudioBytes:
		return step.Permanent(fmt.Errorf("audio %s is %d bytes, limit %d (MAX_AUDIO_BYTES=%d)", key, info.Size, h.maxAudioBytes, h.maxAudioBytes))
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
		return step.Permanent(fmt.Errorf("audio %s: %w", key, err))
	}
	limit := time.Duration(h.maxSeconds) * time.Second
	return worker.Limit(media.CheckLength("audio "+key, d, limit), media.ErrTooLong, "MAX_VIDEO_SECONDS", h.maxSeconds)
}

// upsertSegmentsSQL writes the segments in one statement. A re-run that
// recognises the same text keeps the translation (and, with the same
// timing, the synthesized audio); a changed segment starts over.
const upsertSegmentsSQL = `INSERT INTO segments (task_id, idx, start_ms, end_ms, src_text)
	SELECT $1, s.idx, s.start_ms, s.end_ms, s.src_text
	  FROM unnest($2::int[], $3::int[], $4::int[], $5::text[]) AS s(idx, start_ms, end_ms, src_text)
	ON CONFLICT (task_id, idx) DO UPDATE SET
	    start_ms = EXCLUDED.start_ms, end_ms = EXCLUDED.end_ms, src_text = EXCLUDED.src_text,
	    mt_text = CASE WHEN segments.src_text = EXCLUDED.src_text THEN segments.mt_text END,
	    tts_audio_key = CASE WHEN segments.src_text = EXCLUDED.src_text AND segments.start_ms = EXCLUDED.start_ms
	        AND segments.end_ms = EXCLUDED.end_ms THEN segments.tts_audio_key END,
	    tts_params_json = CASE WHEN segments.src_text = EXCLUDED.src_text AND segments.start_ms = EXCLUDED.start_ms
	        AND segments.end_ms = EXCLUDED.end_ms THEN segments.tts_params_json END`

// stageSegments replaces the task's segments with segs in the success
// transaction: segments past the new end (from an earlier, longer run) go.
func stageSegments(msg *step.Message, taskID uuid.UUID, segs []speech.Segment) {
	msg.Exec(`DELETE FROM segments WHERE task_id = $1 AND idx >= $2`, taskID, len(segs))
	if len(segs) == 0 {
		return
	}
	idx := make([]int32, len(segs))
	start := make([]int32, len(segs))
	end := make([]int32, len(segs))
	text := make([]string, len(segs))
	for i, s := range segs {
		idx[i], start[i], end[i], text[i] = int32(i), int32(s.StartMS), int32(s.EndMS), s.Text
	}
	msg.Exec(upsertSegmentsSQL, taskID, idx, start, end, text)
}

// noSpeech is the result of a task whose audio holds no speech.
var noSpeech = json.RawMessage(`{"no_speech":true}`)

// finishWithoutSpeech ends a task with no speech: it is done, with nothing to
// dub, and integrators hear so.
func finishWithoutSpeech(msg *step.Message) error {
	msg.Apply(task.Succeed(task.RefOf(msg.Envelope), noSpeech, ""))
	msg.Log.Info().Msg("no speech in the audio; task done")
	return nil
}

// transcript is the stored asr.json: the recognised segments with their
// words, times in seconds (as Whisper's verbose_json) and milliseconds.
type transcript struct {
	TaskID   uuid.UUID           `json:"task_id"`
	Language string              `json:"language"`
	Segments []transcriptSegment `json:"segments"`
}

type transcriptSegment struct {
	ID      string           `json:"id"`
	Idx     int              `json:"idx"`
	Start   float64          `json:"start"`
	End     float64          `json:"end"`
	StartMS int              `json:"start_ms"`
	EndMS   int              `json:"end_ms"`
	Text    string           `json:"text"`
	Words   []transcriptWord `json:"words"`
}

type transcriptWord struct {
	Start      float64 `json:"start"`
	End        float64 `json:"end"`
	Word       string  `json:"word"`
	Confidence float64 `json:"confidence"`
}

func newTranscript(taskID uuid.UUID, language string, segs []speech.Segment) transcript {
	t := transcript{TaskID: taskID, Language: language, Segments: make([]transcriptSegment, 0, len(segs))}
	for i, s := range segs {
		ts := transcriptSegment{ID: wire.SegmentID(i), Idx: i, Start: seconds(s.StartMS), End: seconds(s.EndMS),
			StartMS: s.StartMS, EndMS: s.EndMS, Text: s.Text, Words: make([]transcriptWord, 0, len(s.Words))}
		for _, w := range s.Words {
			ts.Words = append(ts.Words, transcriptWord{Start: seconds(w.StartMS), End: seconds(w.EndMS),
				Word: w.Text, Confidence: w.Confidence})
		}
		t.Segments = append(t.Segments, ts)
	}
	return t
}

func seconds(ms int) float64 { return float64(ms) / 1000 }
