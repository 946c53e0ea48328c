package wire

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// ExtractAudio is the payload of task.extract_audio.
type ExtractAudio struct {
	SourceVideoKey string `json:"source_video_key"`
	OutputAudioKey string `json:"output_audio_key"`
	// SourceLanguage, TargetLanguage and SpeakerID are optional; the worker
	// falls back to its configured defaults.
	SourceLanguage string `json:"source_language,omitempty"`
	TargetLanguage string `json:"target_language,omitempty"`
	// TargetLanguages is optional: several languages to dub into at once
	// (see Targets). The audio is extracted and transcribed once; each
	// language gets a child task of its own (ChildTaskID).
	TargetLanguages []string `json:"target_languages,omitempty"`
	SpeakerID       string   `json:"speaker_id,omitempty"`
	// Project is optional: the tenant or project the task belongs to. Long
	// tasks of one project share its places in the queues, and projects
	// take turns.
	Project string `json:"project,omitempty"`
	// Glossary is optional: terms the translation keeps to (see Term).
	Glossary []Term `json:"glossary,omitempty"`
	// Review is optional: the stages at which the task stops for a
	// person's edits of its lines before the voice is made
	// (ReviewTranscript after asr, ReviewTranslation after translate).
	Review []string `json:"review,omitempty"`
	// SubtitlesKey is optional: a subtitle file (SRT or WebVTT) at
	// subtitles/{task_id}/... that the task starts from instead of
	// recognising the speech. SubtitlesLanguage is its language: the
	// source's (the default) — asr is skipped and the file's cues are the
	// segments, translated as usual — or the target's — asr and translate
	// are skipped and the lines are spoken as they are (see SkippedSteps).
	SubtitlesKey      string `json:"subtitles_key,omitempty"`
	SubtitlesLanguage string `json:"subtitles_language,omitempty"`
	// SourceSubtitlesKey is optional, beside a target-language
	// SubtitlesKey: a second file with the source text of the same lines,
	// for the bilingual subtitles.
	SourceSubtitlesKey string `json:"source_subtitles_key,omitempty"`
	// BurnSubtitles is optional: BurnTarget or BurnBilingual draws those
	// subtitles into the picture of an extra output, final.burned.mp4 beside
	// final.mp4.
	BurnSubtitles string `json:"burn_subtitles,omitempty"`
}

// The values of ExtractAudio.BurnSubtitles.
const (
	BurnTarget    = "target"
	BurnBilingual = "bilingual"
)

// SkippedSteps returns the steps the task of p leaves out when its source
// language is source: none without subtitles; asr for subtitles in the
// source language (SubtitlesLanguage empty or source); asr and translate
// for subtitles in another language (the target's: pkg/admit refuses any
// other).
func (p *ExtractAudio) SkippedSteps(source string) []string {
	if p.SubtitlesKey == "" {
		return nil
	}
	return SkippedBySubtitles(p.SubtitlesLanguage, source)
}

// SkippedBySubtitles returns the steps a task from subtitles in language
// lang leaves out when its source language is source: asr when lang is
// the source (or empty), else asr and translate.
func SkippedBySubtitles(lang, source string) []string {
	if lang == "" || lang == source {
		return []string{StepASR}
	}
	return []string{StepASR, StepTranslate}
}

// The stages a task may stop at for review (ExtractAudio.Review).
const (
	ReviewTranscript  = "transcript"
	ReviewTranslation = "translation"
)

// ReviewStages lists the review stages in the order a task reaches them.
var ReviewStages = []string{ReviewTranscript, ReviewTranslation}

// ASR is the payload of task.asr. A message with neither Chunk nor Merge
// (the seed's, as extract_audio and external publishers send it) names the
// whole audio; the asr step fans it out into one message per chunk, and the
// chunk whose success completes the step emits the Merge message.
type ASR struct {
	AudioKey  string `json:"audio_key"`
	Language  string `json:"language"`
	OutputKey string `json:"output_key"`
	// Chunk, when set, makes AudioKey one chunk of the task's audio.
	Chunk *ASRChunk `json:"chunk,omitempty"`
	// Merge, when set, asks for the chunks' transcripts to be merged into
	// OutputKey.
	Merge bool `json:"merge,omitempty"`
}

// ASRChunk places one chunk of a task's audio on the whole audio's
// timeline.
type ASRChunk struct {
	// Index counts the chunks from 0 in order.
	Index int `json:"index"`
	// OffsetMS is where the chunk's file starts in the whole audio.
	OffsetMS int `json:"offset_ms"`
	// LeadMS is the start of the chunk's file that only warms the
	// recogniser up: the chunk before transcribed it.
	LeadMS int `json:"lead_ms"`
}

// Translate is the payload of task.translate: one batch of segments.
type Translate struct {
	TaskID         uuid.UUID `json:"task_id"`
	SegmentIDs     []string  `json:"segment_ids"`
	SourceLanguage string    `json:"source_language"`
	TargetLanguage string    `json:"target_language"`
	// BatchSize is optional (0 when absent): TRANSLATE_BATCH_SIZE applies.
	BatchSize int `json:"batch_size,omitempty"`
	// Revision is optional (0 when absent): a batch sent again after a
	// person approved the translation of a task in review is revision 1,
	// a part of its own (see Part), and never stops the task for review
	// again.
	Revision int `json:"revision,omitempty"`
}

// TTS is the payload of task.tts. Without SegmentIDs it is the seed's one
// message per task (every segment without audio); with them, one part of
// the step, emitted by the translate batch that translated those segments
// (see Part). Absent settings are zero (nil for the two where zero is
// meaningful) and the worker's configuration applies.
type TTS struct {
	TaskID         uuid.UUID `json:"task_id"`
	BatchSize      int       `json:"batch_size,omitempty"`
	MaxConcurrency int       `json:"max_concurrency,omitempty"`
	MaxRetries     *int      `json:"max_retries,omitempty"`
	RetryDelaySec  *float64  `json:"retry_delay_sec,omitempty"`
	SpeakerID      string    `json:"speaker_id,omitempty"`
	// SegmentIDs, when set, are the segments of this part ("seg-N"):
	// only those still without audio are synthesized.
	SegmentIDs []string `json:"segment_ids,omitempty"`
	// Version is the output version this run builds (0 or 1: the first
	// dub; see VersionPart).
	Version int `json:"version,omitempty"`
}

// MuxVideo is the payload of task.mux_video.
type MuxVideo struct {
	// Options are optional per-task settings (see MuxOptions).
	Options *MuxOptions `json:"options,omitempty"`

	TaskID         uuid.UUID `json:"task_id"`
	SourceVideoKey string    `json:"source_video_key"`
	TTSAudioKey    string    `json:"tts_audio_key"`
	OutputVideoKey string    `json:"output_video_key"`
	// Version is the output version this run builds (see TTS.Version).
	Version int `json:"version,omitempty"`
	// StreamAfter is set on a growing stream's messages only: the part of
	// asr or tts whose success may have made more of the timeline final.
	// Such a message makes the stream's next batches (part
	// stream/{StreamAfter}), waits for nothing and does not finish the
	// task (see StreamFor).
	StreamAfter string `json:"stream_after,omitempty"`
}

// Error classes of a dead letter.
const (
	ClassPermanent = "permanent"
	ClassTransient = "transient"
	ClassTimeout   = "timeout"
	ClassInvalid   = "invalid"
	ClassBroker    = "broker"
)

// DeadLetter is the message published to task.dlq
// (proto/dead_letter.schema.json): original_message, failed_at,
// failure_reason and attempt, plus the step and the error class. Build one with NewDeadLetter.
type DeadLetter struct {
	// OriginalMessage is the failed message as JSON, or a JSON string of its
	// base64 bytes when OriginalEncoding is "base64".
	OriginalMessage  json.RawMessage `json:"original_message"`
	OriginalEncoding string          `json:"original_encoding,omitempty"`
	// OriginalTruncated is set when only the first MaxMessageBytes of an
	// oversized message are kept.
	OriginalTruncated bool      `json:"original_truncated,omitempty"`
	FailedAt          time.Time `json:"failed_at"`
	FailureReason     string    `json:"failure_reason"`
	// Attempt is the attempt that failed last, 0 if the message was unreadable.
	Attempt int `json:"attempt"`
	// RetryCount is how many times the step was retried before it was
	// dead-lettered: a transient failure is retried up to STEP_MAX_RETRIES
	// times (3 by default: after 1 s, 2 s, 4 s), then sent to the DLQ with
	// retry_count 3; a permanent or invalid message is never retried (0).
	RetryCount int    `json:"retry_count"`
	Step       string `json:"step,omitempty"`
	// Queue is the queue the failed message was consumed from, when a
	// worker dead-lettered it.
	Queue      string    `json:"queue,omitempty"`
	ErrorClass string    `json:"error_class"`
	TaskID     uuid.UUID `json:"task_id,omitzero"`
	TraceID    string    `json:"trace_id,omitempty"`
}

// maxReasonBytes bounds failure_reason and error texts (errorText in
// defs.schema.json counts characters; bytes are stricter).
const maxReasonBytes = 4096

// NewDeadLetter wraps the body of a failed message. A body that is JSON is
// embedded as is; any other body is kept as base64, only its first
// MaxMessageBytes if it is longer. env, when the body decoded, supplies the
// step, attempt, task and trace; it may be nil.
func NewDeadLetter(body []byte, env *Envelope, class, reason string, failedAt time.Time) *DeadLetter {
	d := &DeadLetter{
		FailedAt:      failedAt.UTC(),
		FailureReason: Reason(reason),
		ErrorClass:    class,
	}
	if len(body) > MaxMessageBytes {
		body = body[:MaxMessageBytes]
		d.OriginalTruncated = true
	}
	if !d.OriginalTruncated && json.Valid(body) {
		d.OriginalMessage = json.RawMessage(body)
	} else {
		d.OriginalEncoding = "base64"
		d.OriginalMessage, _ = json.Marshal(base64.StdEncoding.EncodeToString(body))
	}
	if env != nil {
		d.Attempt = env.Attempt
		d.Step = env.Step
		d.TaskID = env.TaskID
		d.TraceID = env.TraceID
	}
	return d
}

// OriginalBody returns the bytes of the failed message, ready to publish
// again.
func (d *DeadLetter) OriginalBody() ([]byte, error) {
	if d.OriginalEncoding != "base64" {
		return d.OriginalMessage, nil
	}
	var s string
	if err := json.Unmarshal(d.OriginalMessage, &s); err != nil {
		return nil, fmt.Errorf("decode original_message: %w", err)
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("decode original_message: %w", err)
	}
	return b, nil
}

// Compensation is the message published to task.tts_compensation for a
// segment whose synthesis still failed after all retries.
type Compensation struct {
	TaskID     uuid.UUID `json:"task_id"`
	SegmentIdx int       `json:"segment_idx"`
	Error      string    `json:"error"`
	CreatedAt  time.Time `json:"created_at"`
	// RoutingKey is where a re-drive publishes: always task.tts.
	RoutingKey string `json:"routing_key"`
	TraceID    string `json:"trace_id,omitempty"`
}

// NewCompensation returns the compensation message of one segment.
func NewCompensation(taskID uuid.UUID, idx int, cause error, traceID string, now time.Time) *Compensation {
	return &Compensation{
		TaskID:     taskID,
		SegmentIdx: idx,
		Error:      truncate(cause.Error(), maxReasonBytes),
		CreatedAt:  now.UTC(),
		RoutingKey: RoutingKey(StepTTS),
		TraceID:    traceID,
	}
}

// Integrator events, published under EventPrefix + the event name. The
// task.* events are the task lifecycle's transitions (pkg/task).
const (
	EventTaskQueued       = "task.queued"
	EventTaskStarted      = "task.started"
	EventTaskCompensating = "task.compensating"
	EventTaskResumed      = "task.resumed"
	EventTaskSucceeded    = "task.succeeded"
	EventTaskFailed       = "task.failed"
	EventTaskCancelled    = "task.cancelled"
	EventTaskRetried      = "task.retried"
	EventTaskRedubbing    = "task.redubbing"
	EventTaskReview       = "task.review"
	EventTaskApproved     = "task.approved"
	EventWaitingAssigned  = "waiting.assigned"
)

// Event is a notification for systems outside dubflow, published under
// "event.<Event>". Task events carry TaskID and Status.
//
// EventID identifies the event: an event delivered twice (the outbox is
// at-least-once) carries the same id, also as the AMQP message_id;
// integrators deduplicate by it. Marshal gives an event without one a
// fresh id.
type Event struct {
	EventID        uuid.UUID       `json:"event_id,omitzero"`
	Event          string          `json:"event"`
	TaskID         uuid.UUID       `json:"task_id,omitzero"`
	Status         string          `json:"status,omitempty"`
	Step           string          `json:"step,omitempty"`
	Error          string          `json:"error,omitempty"`
	OutputVideoKey string          `json:"output_video_key,omitempty"`
	OccurredAt     time.Time       `json:"occurred_at"`
	TraceID        string          `json:"trace_id,omitempty"`
	Data           json.RawMessage `json:"data,omitempty"`
}

// RoutingKey returns the routing key of the event, "event.<event>".
func (e *Event) RoutingKey() string { return EventPrefix + e.Event }

// SegmentID returns the wire name of segment idx, "seg-<idx>".
func SegmentID(idx int) string { return "seg-" + strconv.Itoa(idx) }

// SegmentIndex parses a segment's wire name, "seg-<idx>", into its index.
func SegmentIndex(id string) (int, error) {
	digits, ok := strings.CutPrefix(id, "seg-")
	valid := ok && digits != "" && len(digits) <= 9 && (digits == "0" || digits[0] != '0') &&
		strings.Trim(digits, "0123456789") == ""
	if !valid {
		return 0, invalid("segment_id", fmt.Sprintf("%q does not look like \"seg-0\"", id))
	}
	return strconv.Atoi(digits)
}

// SegmentIndexes parses a message's segment ids into their indexes (nil
// for none).
func SegmentIndexes(ids []string) ([]int32, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	out := make([]int32, 0, len(ids))
	for _, id := range ids {
		idx, err := SegmentIndex(id)
		if err != nil {
			return nil, fmt.Errorf("segment_ids: %w", err)
		}
		out = append(out, int32(idx))
	}
	return out, nil
}

// truncate makes s clean text (CleanText) of at most n bytes, cut without
// leaving a broken UTF-8 sequence.
func truncate(s string, n int) string {
	s = CleanText(s)
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
