// Package segment owns every write of the segments table: a task's lines,
// each with its timing, source text, translation, speaker, voice and
// synthesised clip. Each write is a named operation of the step or the
// person that makes it; no other package inserts, updates or deletes a
// segment (pkg/internal/layers checks it).
//
// An operation a worker makes with its step's outcome returns its
// Statements, which the worker stages (step.Message.Exec) so that they run
// in the one batch of the success transaction; one that runs on its own
// or inside a caller's transaction takes the Execer it runs on. The
// errors returned are the driver's: the caller names what it was doing.
//
//	operation        writes                                         who
//	Transcribed      the lines heard in a range, from base           asr
//	Subtitled        the lines of a person's subtitles, from 0       extract_audio
//	InheritCTE       a child task's copy of the parent's lines       pkg/task's Spawn
//	Translated       the translation of lines that had none          translate
//	SpeakersFound    the speaker and voice of lines with none        tts
//	VoicesNamed      the voice of a named speaker's lines            tts
//	Skipped          an empty line's clip: silence                   tts
//	Synthesised      a line's clip, its parameters and voice         tts
//	SynthesisFailed  a line's failure to be synthesised              tts
//	SpeakerChanged   the new speaker's voice on lines not spoken yet pkg/retry
//	Edited           one line changed in review                      pkg/dub
//	Replaced         all the lines, rewritten in review              pkg/dub
//	Redubbed         one line's new translation, its clip cleared    pkg/dub
package segment

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
)

// Statement is one statement for the caller to stage: a step's worker runs
// it with its outcome (step.Message.Exec(s.SQL, s.Args...)).
type Statement struct {
	SQL  string
	Args []any
}

// Execer is what an operation runs on: a pool, a connection or a
// transaction.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Row is the content of one line: its timing, texts, speaker and voice,
// and the register of its voice as measured.
type Row struct {
	StartMS, EndMS int
	// Source is the text as spoken (or as the subtitles give it).
	Source string
	// Text is the translation, nil while there is none.
	Text *string
	// Speaker and Voice are "" while unknown.
	Speaker, Voice        string
	PitchHz, BrightnessHz float64
}

// upsertTranscribedSQL writes the segments in one statement. A re-run that
// recognises the same text keeps the translation (and, with the same
// timing, the synthesized audio); a changed segment starts over.
const upsertTranscribedSQL = `INSERT INTO segments (task_id, idx, start_ms, end_ms, src_text, pitch_hz, brightness_hz)
	SELECT $1, s.idx, s.start_ms, s.end_ms, s.src_text, s.pitch_hz, s.brightness_hz
	  FROM unnest($2::int[], $3::int[], $4::int[], $5::text[], $6::float8[], $7::float8[])
	       AS s(idx, start_ms, end_ms, src_text, pitch_hz, brightness_hz)
	ON CONFLICT (task_id, idx) DO UPDATE SET
	    start_ms = EXCLUDED.start_ms, end_ms = EXCLUDED.end_ms, src_text = EXCLUDED.src_text,
	    pitch_hz = EXCLUDED.pitch_hz, brightness_hz = EXCLUDED.brightness_hz,
	    mt_text = CASE WHEN segments.src_text = EXCLUDED.src_text THEN segments.mt_text END,
	    tts_audio_key = CASE WHEN segments.src_text = EXCLUDED.src_text AND segments.start_ms = EXCLUDED.start_ms
	        AND segments.end_ms = EXCLUDED.end_ms THEN segments.tts_audio_key END,
	    tts_params_json = CASE WHEN segments.src_text = EXCLUDED.src_text AND segments.start_ms = EXCLUDED.start_ms
	        AND segments.end_ms = EXCLUDED.end_ms THEN segments.tts_params_json END`

// Transcribed replaces task id's segments numbered from base up to end
// (-1: all after base) with rows, numbered from base (their timing, source
// text and register; Text, Speaker and Voice are not read): segments past
// the new end of the range (from an earlier, longer run) go. It is one
// statement, and a second when rows is not empty.
func Transcribed(id uuid.UUID, base, end int, rows []Row) []Statement {
	out := make([]Statement, 0, 2)
	if end < 0 {
		out = append(out, Statement{`DELETE FROM segments WHERE task_id = $1 AND idx >= $2`, []any{id, base + len(rows)}})
	} else {
		out = append(out, Statement{`DELETE FROM segments WHERE task_id = $1 AND idx >= $2 AND idx < $3`,
			[]any{id, base + len(rows), end}})
	}
	if len(rows) == 0 {
		return out
	}
	n := len(rows)
	idx, start, stop := make([]int32, n), make([]int32, n), make([]int32, n)
	text := make([]string, n)
	pitch, bright := make([]float64, n), make([]float64, n)
	for i, r := range rows {
		idx[i], start[i], stop[i], text[i] = int32(base+i), int32(r.StartMS), int32(r.EndMS), r.Source
		pitch[i], bright[i] = r.PitchHz, r.BrightnessHz
	}
	return append(out, Statement{upsertTranscribedSQL, []any{id, idx, start, stop, text, pitch, bright}})
}

// insertSubtitledSQL writes a task's lines as its segments in one
// statement, replacing any an earlier attempt wrote.
const insertSubtitledSQL = `INSERT INTO segments (task_id, idx, start_ms, end_ms, src_text, mt_text, speaker, pitch_hz, brightness_hz)
	SELECT $1, s.idx, s.start_ms, s.end_ms, s.src_text, s.mt_text, s.speaker, s.pitch_hz, s.brightness_hz
	  FROM unnest($2::int[], $3::int[], $4::int[], $5::text[], $6::text[], $7::text[], $8::float8[], $9::float8[])
	       AS s(idx, start_ms, end_ms, src_text, mt_text, speaker, pitch_hz, brightness_hz)
	ON CONFLICT (task_id, idx) DO UPDATE SET start_ms = EXCLUDED.start_ms, end_ms = EXCLUDED.end_ms,
	    src_text = EXCLUDED.src_text, mt_text = EXCLUDED.mt_text, speaker = EXCLUDED.speaker, voice = '',
	    pitch_hz = EXCLUDED.pitch_hz, brightness_hz = EXCLUDED.brightness_hz, tts_audio_key = NULL, tts_params_json = NULL`

// Subtitled makes rows, the lines of a person's subtitles, task id's
// segments, numbered from 0, in place of any an earlier attempt wrote (a
// Row's Voice is not read: a voice is chosen when the speech is made). A
// line in the target language has its translation already (Text); one in
// the source language waits for translate (Text nil). It is two
// statements.
func Subtitled(id uuid.UUID, rows []Row) []Statement {
	n := len(rows)
	idx, start, stop := make([]int32, n), make([]int32, n), make([]int32, n)
	src, mt, who := make([]string, n), make([]*string, n), make([]string, n)
	pitch, bright := make([]float64, n), make([]float64, n)
	for i, r := range rows {
		idx[i], start[i], stop[i], src[i], mt[i], who[i] = int32(i), int32(r.StartMS), int32(r.EndMS), r.Source, r.Text, r.Speaker
		pitch[i], bright[i] = r.PitchHz, r.BrightnessHz
	}
	return []Statement{
		{`DELETE FROM segments WHERE task_id = $1 AND idx >= $2`, []any{id, n}},
		{insertSubtitledSQL, []any{id, idx, start, stop, src, mt, who, pitch, bright}},
	}
}

// InheritCTE is the segments' part of a child task's spawn (pkg/task's
// Spawn, one statement): a common table expression named segs that copies
// the parent's segments — timing and source text — as the child's. It
// reads the child made in the statement from the CTE created (id) and the
// parent from @parent.
const InheritCTE = `segs AS (
	INSERT INTO segments (task_id, idx, start_ms, end_ms, src_text)
	SELECT c.id, s.idx, s.start_ms, s.end_ms, s.src_text FROM created c JOIN segments s ON s.task_id = @parent
)`

// Translated records texts as the translations of task id's segments idx
// (one for one) that have none yet.
func Translated(id uuid.UUID, idx []int32, texts []string) Statement {
	return Statement{`UPDATE segments AS s SET mt_text = t.mt
			FROM unnest($2::int[], $3::text[]) AS t(idx, mt)
			WHERE s.task_id = $1 AND s.idx = t.idx AND s.mt_text IS NULL`, []any{id, idx, texts}}
}

// SpeakersFound gives task id's segments idx that have no speaker yet
// their speakers and voices (one for one).
func SpeakersFound(ctx context.Context, q Execer, id uuid.UUID, idx []int32, speakers, voices []string) error {
	_, err := q.Exec(ctx, `UPDATE segments AS s SET speaker = v.speaker, voice = v.voice
		FROM unnest($2::int[], $3::text[], $4::text[]) AS v(idx, speaker, voice)
		WHERE s.task_id = $1 AND s.idx = v.idx AND s.speaker = ''`, id, idx, speakers, voices)
	return err
}

// VoicesNamed gives task id's segments of each of speakers (named by a
// person's subtitles) that have no voice yet its voice in voices (one for
// one).
func VoicesNamed(ctx context.Context, q Execer, id uuid.UUID, speakers, voices []string) error {
	_, err := q.Exec(ctx, `UPDATE segments AS s SET voice = v.voice
		FROM unnest($2::text[], $3::text[]) AS v(speaker, voice)
		WHERE s.task_id = $1 AND s.speaker = v.speaker AND s.voice = ''`, id, speakers, voices)
	return err
}

// Skipped records that segment idx of task id, whose translation is empty,
// has nothing to say (mux_video plays silence in its slot), unless it has
// audio already.
func Skipped(ctx context.Context, q Execer, id uuid.UUID, idx int) error {
	_, err := q.Exec(ctx, `UPDATE segments SET tts_audio_key = '', tts_params_json = '{"skipped":"empty text"}',
			tts_error = '' WHERE task_id = $1 AND idx = $2 AND tts_audio_key IS NULL`, id, idx)
	return err
}

// Synthesised records the clip of segment idx of task id: its object key,
// the synthesis's parameters (JSON) and the voice that spoke it; an
// earlier failure is cleared.
func Synthesised(ctx context.Context, q Execer, id uuid.UUID, idx int, key string, params []byte, voice string) error {
	_, err := q.Exec(ctx, `UPDATE segments SET tts_audio_key = $3, tts_params_json = $4, tts_error = '',
		voice = $5 WHERE task_id = $1 AND idx = $2`, id, idx, key, params, voice)
	return err
}

// SynthesisFailed records that segment idx of task id could not be
// synthesised, for reason, and counts the failure.
func SynthesisFailed(id uuid.UUID, idx int, reason string) Statement {
	return Statement{`UPDATE segments SET tts_error = $3, tts_failures = tts_failures + 1, tts_failed_at = now()
			WHERE task_id = $1 AND idx = $2`, []any{id, idx, reason}}
}

// SpeakerChanged gives task id's segments that have no audio yet and were
// to speak with the voice former (the task's former speaker, which tts
// gave to its first speaker's segments) the voice speaker.
func SpeakerChanged(ctx context.Context, q Execer, id uuid.UUID, former, speaker string) error {
	_, err := q.Exec(ctx, `UPDATE segments SET voice = $3
		WHERE task_id = $1 AND tts_audio_key IS NULL AND voice <> '' AND voice = $2`, id, former, speaker)
	return err
}

// Edited records r as segment idx of task id: its timing, texts, speaker
// and voice (not its register).
func Edited(ctx context.Context, q Execer, id uuid.UUID, idx int, r Row) error {
	_, err := q.Exec(ctx, `UPDATE segments SET src_text = $3, mt_text = $4, start_ms = $5, end_ms = $6,
			speaker = $7, voice = $8 WHERE task_id = $1 AND idx = $2`,
		id, idx, r.Source, r.Text, r.StartMS, r.EndMS, r.Speaker, r.Voice)
	return err
}

// Replaced replaces all of task id's segments with rows, numbered from 0.
func Replaced(ctx context.Context, q Execer, id uuid.UUID, rows []Row) error {
	if _, err := q.Exec(ctx, `DELETE FROM segments WHERE task_id = $1`, id); err != nil {
		return err
	}
	n := len(rows)
	idx, start, end := make([]int32, n), make([]int32, n), make([]int32, n)
	src, mt, speaker, voice := make([]string, n), make([]*string, n), make([]string, n), make([]string, n)
	pitch, bright := make([]float64, n), make([]float64, n)
	for i, r := range rows {
		idx[i], start[i], end[i] = int32(i), int32(r.StartMS), int32(r.EndMS)
		src[i], mt[i], speaker[i], voice[i], pitch[i], bright[i] = r.Source, r.Text, r.Speaker, r.Voice, r.PitchHz, r.BrightnessHz
	}
	_, err := q.Exec(ctx, `INSERT INTO segments (task_id, idx, start_ms, end_ms, src_text, mt_text, speaker, voice,
		pitch_hz, brightness_hz)
		SELECT $1, * FROM unnest($2::int[], $3::int[], $4::int[], $5::text[], $6::text[], $7::text[], $8::text[],
		                         $9::float8[], $10::float8[])`,
		id, idx, start, end, src, mt, speaker, voice, pitch, bright)
	return err
}

// Redubbed records text as the new translation of segment idx of task id
// and clears its clip and failures, so that tts speaks it again.
func Redubbed(ctx context.Context, q Execer, id uuid.UUID, idx int, text string) error {
	_, err := q.Exec(ctx, `UPDATE segments SET mt_text = $3, tts_audio_key = NULL, tts_params_json = NULL,
		tts_error = '', tts_failures = 0, tts_failed_at = NULL WHERE task_id = $1 AND idx = $2`, id, idx, text)
	return err
}
