// Package stream owns a task's growing stream (issue 53): while a long task
// is dubbed, mux_video makes its dubbed video, in order, as an HLS stream
// under outputs/{task_id}/stream/, one batch of the timeline at a time, as
// soon as every line in the batch is synthesized. It decides the next batch
// (Next), records a made batch (Record), and writes the playlists
// (Playlists) that mux_video stores and the console answers with. No other
// package writes task_streams or stream_batches (pkg/internal/layers checks
// it).
//
// A batch ends where a line starts whose predecessor is final — so every
// line in it was fitted knowing where the next one starts, as mux_video's
// final run fits it — or at the end of the timeline. A batch is made only
// when it is at least MinBatchMS long (more once the stream has grown),
// unless it ends the timeline.
package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// MinBatchMS is the shortest batch made before the end of the timeline: a
// batch costs ffmpeg runs and a playlist write, whatever its length. The
// shortest batch grows with the stream (half of what is made, up to
// MaxMinBatchMS): the first minute comes in small steps, to be watched
// soon; later, fewer and longer batches cost the cores less, and the
// stream is far ahead of a player anyway.
const (
	MinBatchMS    = 10_000
	MaxMinBatchMS = 60_000
)

// minBatch is the shortest batch made from made ms on.
func minBatch(made int) int { return min(max(MinBatchMS, made/2), MaxMinBatchMS) }

// Reader is what the package's reads run on: a pool, a connection or a
// transaction (a read-only one too).
type Reader interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Querier is what its writes run on.
type Querier interface {
	Reader
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// State is a task's stream as recorded.
type State struct {
	TaskID      uuid.UUID
	MadeUntilMS int
	// TotalMS is the timeline's length, 0 while unknown.
	TotalMS   int
	Init      Init
	Ended     bool
	LastError string
	// Version is the output version the playlists show (1, or a re-dub's).
	Version   int
	UpdatedAt time.Time
	Batches   []Batch
}

// Batch is one made stretch [FromMS, ToMS) of the timeline.
type Batch struct {
	FromMS, ToMS int
	// MapKey is the init segment its pieces need.
	MapKey string
	Pieces []Piece
	// VTTKey is the batch's subtitles (WebVTT, on the task's timeline).
	VTTKey string
}

// Init is the init segment a stream names first: its key, the SHA-256 of
// its bytes (a batch whose init differs stores and names its own) and its
// codecs (RFC 6381: "avc1.64001e,mp4a.40.2").
type Init struct {
	Key, SHA256, Codecs string
}

// Piece is one stored segment of a batch.
type Piece struct {
	Key        string `json:"key"`
	DurationMS int    `json:"duration_ms"`
}

// ErrNone is returned by Load for a task that has no stream.
var ErrNone = errors.New("the task has no stream")

// Next is the stretch a stream message may make now, from the end of what
// is made: To is where the last complete line ends the batch, and Final
// says the whole timeline is final (every chunk transcribed, every line
// synthesized), so that the batch ends the timeline instead (its length is
// the caller's: the video's). Ok is false when there is nothing to make
// yet (the batch would be shorter than MinBatchMS) or the stream ended.
type Plan struct {
	FromMS, ToMS int
	Final        bool
	Ok           bool
}

// nextSQL finds, for task $1 from $2 ms: where the first chunk of asr not
// yet transcribed starts (its offset and lead: what it will transcribe;
// NULL when every registered chunk is done, 0 before any is registered),
// and the start of the first line without its clip; then the last line
// start after $2 at or before both: every line before it is final, and the
// last of them knows where the next one starts.
const nextSQL = `WITH chunks AS (
	SELECT p.part, convert_from(p.message, 'UTF8')::jsonb #> '{payload,chunk}' AS c
	  FROM step_parts p
	 WHERE p.task_id = $1 AND p.step = 'asr' AND p.part LIKE 'chunk-%' AND p.message IS NOT NULL
), open_chunk AS (
	SELECT min((c ->> 'offset_ms')::int + coalesce((c ->> 'lead_ms')::int, 0)) AS at, count(*) AS n
	  FROM chunks
	 WHERE NOT EXISTS (SELECT 1 FROM task_steps s WHERE s.task_id = $1 AND s.step = 'asr'
	                      AND s.part = chunks.part AND s.status = 'succeeded')
), registered AS (SELECT count(*) AS n FROM chunks
), open_line AS (
	SELECT min(start_ms) AS at FROM segments WHERE task_id = $1 AND tts_audio_key IS NULL
), bound AS (
	SELECT CASE WHEN (SELECT n FROM registered) = 0 THEN 0 ELSE (SELECT at FROM open_chunk) END AS chunk_at,
	       (SELECT at FROM open_line) AS line_at
)
SELECT b.chunk_at, b.line_at,
       (SELECT max(s.start_ms) FROM segments s
         WHERE s.task_id = $1 AND s.start_ms > $2
           AND s.start_ms <= least(coalesce(b.chunk_at, 2147483647), coalesce(b.line_at, 2147483647))) AS cut
  FROM bound b`

// Next decides what a stream message of task may make now (see Plan), and
// returns the init segment the stream names so far. The stream row is
// created the first time.
func Next(ctx context.Context, q Querier, task uuid.UUID) (Plan, Init, error) {
	var made int
	var ended bool
	var init Init
	err := q.QueryRow(ctx, `INSERT INTO task_streams (task_id) VALUES ($1)
		ON CONFLICT (task_id) DO UPDATE SET task_id = EXCLUDED.task_id
		RETURNING made_until_ms, ended_at IS NOT NULL, init_key, init_sha256, codecs`, task).
		Scan(&made, &ended, &init.Key, &init.SHA256, &init.Codecs)
	if err != nil {
		return Plan{}, init, fmt.Errorf("open the stream of %s: %w", task, err)
	}
	if ended {
		return Plan{FromMS: made}, init, nil
	}
	var chunkAt, lineAt, cut *int
	if err := q.QueryRow(ctx, nextSQL, task, made).Scan(&chunkAt, &lineAt, &cut); err != nil {
		return Plan{}, init, fmt.Errorf("plan the stream of %s: %w", task, err)
	}
	p := Plan{FromMS: made}
	if chunkAt == nil && lineAt == nil {
		p.Final, p.Ok = true, true
		return p, init, nil
	}
	if cut != nil && *cut-made >= minBatch(made) {
		p.ToMS, p.Ok = *cut, true
	}
	return p, init, nil
}

// Beginner starts transactions: a pool.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Locked runs fn with task's stream as recorded, holding the stream's row
// until fn returns: writers of the stored playlists take turns, so that a
// slower one never stores an older playlist over a newer one.
func Locked(ctx context.Context, db Beginner, task uuid.UUID, fn func(st *State) error) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT 1 FROM task_streams WHERE task_id = $1 FOR UPDATE`, task); err != nil {
			return fmt.Errorf("lock the stream of %s: %w", task, err)
		}
		st, err := Load(ctx, tx, task)
		if err != nil {
			return err
		}
		return fn(st)
	})
}

// Record adds batch b to the stream, if the stream is still made up to
// b.FromMS (another worker may have made the same stretch meanwhile: then
// it returns false and records nothing). ended marks the stream ended (b
// reaches totalMS); init is the init segment the stream names first
// (recorded by the first batch).
func Record(ctx context.Context, q Querier, task uuid.UUID, b Batch, totalMS int, ended bool, init Init) (bool, error) {
	pieces, err := json.Marshal(b.Pieces)
	if err != nil {
		return false, fmt.Errorf("encode the pieces of the stream of %s: %w", task, err)
	}
	tag, err := q.Exec(ctx, `WITH moved AS (
		UPDATE task_streams SET made_until_ms = $3, total_ms = nullif($7, 0),
		       init_key = CASE WHEN init_key = '' THEN $8 ELSE init_key END,
		       init_sha256 = CASE WHEN init_sha256 = '' THEN $9 ELSE init_sha256 END,
		       codecs = CASE WHEN codecs = '' THEN $11 ELSE codecs END,
		       ended_at = CASE WHEN $10 THEN now() END, last_error = '', updated_at = now()
		 WHERE task_id = $1 AND made_until_ms = $2 AND ended_at IS NULL
		RETURNING task_id)
		INSERT INTO stream_batches (task_id, from_ms, to_ms, map_key, pieces, vtt_key)
		SELECT task_id, $2, $3, $4, $5, $6 FROM moved
		ON CONFLICT (task_id, from_ms) DO UPDATE SET to_ms = EXCLUDED.to_ms, map_key = EXCLUDED.map_key,
		       pieces = EXCLUDED.pieces, vtt_key = EXCLUDED.vtt_key, made_at = now()`,
		task, b.FromMS, b.ToMS, b.MapKey, pieces, b.VTTKey, totalMS, init.Key, init.SHA256, ended, init.Codecs)
	if err != nil {
		return false, fmt.Errorf("record a batch of the stream of %s: %w", task, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Failed records why the stream's last try to make a batch failed; the
// next stream message tries again from where the stream is made.
func Failed(ctx context.Context, q Querier, task uuid.UUID, reason string) error {
	if len(reason) > 2000 {
		reason = reason[:2000]
	}
	_, err := q.Exec(ctx, `UPDATE task_streams SET last_error = $2, updated_at = now() WHERE task_id = $1`, task, reason)
	if err != nil {
		return fmt.Errorf("record the stream failure of %s: %w", task, err)
	}
	return nil
}

// Load reads a task's stream with its batches in order; ErrNone when the
// task has none.
func Load(ctx context.Context, q Reader, task uuid.UUID) (*State, error) {
	st := &State{TaskID: task}
	var total *int
	err := q.QueryRow(ctx, `SELECT made_until_ms, total_ms, init_key, init_sha256, codecs, ended_at IS NOT NULL, last_error, version, updated_at
		FROM task_streams WHERE task_id = $1`, task).
		Scan(&st.MadeUntilMS, &total, &st.Init.Key, &st.Init.SHA256, &st.Init.Codecs, &st.Ended, &st.LastError, &st.Version, &st.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNone
	}
	if err != nil {
		return nil, fmt.Errorf("read the stream of %s: %w", task, err)
	}
	if total != nil {
		st.TotalMS = *total
	}
	rows, err := q.Query(ctx, `SELECT from_ms, to_ms, map_key, pieces, vtt_key FROM stream_batches
		WHERE task_id = $1 ORDER BY from_ms`, task)
	if err != nil {
		return nil, fmt.Errorf("read the stream of %s: %w", task, err)
	}
	st.Batches, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Batch, error) {
		var b Batch
		var pieces []byte
		if err := r.Scan(&b.FromMS, &b.ToMS, &b.MapKey, &pieces, &b.VTTKey); err != nil {
			return b, err
		}
		return b, json.Unmarshal(pieces, &b.Pieces)
	})
	if err != nil {
		return nil, fmt.Errorf("read the stream of %s: %w", task, err)
	}
	return st, nil
}

// Summary is what a task's page, realtime status and dubctl show of its
// stream.
type Summary struct {
	// PlayableMS is how much plays from the start: what is made.
	PlayableMS int
	// Ended says the stream will not grow (whole, or its task ended).
	Ended bool
	// Playlist is the stored multivariant playlist's key ("" until the
	// first batch is made).
	Playlist string
	// Version is the output version its playlists show.
	Version int
}

// Summarize reads the summary of a task's stream; nil when it has none.
func Summarize(ctx context.Context, q Reader, task uuid.UUID) (*Summary, error) {
	var s Summary
	var initKey string
	err := q.QueryRow(ctx, `SELECT made_until_ms, ended_at IS NOT NULL, init_key, version FROM task_streams WHERE task_id = $1`, task).
		Scan(&s.PlayableMS, &s.Ended, &initKey, &s.Version)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the stream of %s: %w", task, err)
	}
	if initKey != "" {
		s.Playlist = path.Dir(initKey) + "/" + MasterName
	}
	return &s, nil
}

// Replace records batches re-made for output version v (a re-dub's lines
// touch them): each replaces the batch of the same stretch, and the stream
// shows version v from now on. A batch whose stretch the stream does not
// have is refused.
func Replace(ctx context.Context, db Beginner, task uuid.UUID, v int, batches []Batch) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		for _, b := range batches {
			pieces, err := json.Marshal(b.Pieces)
			if err != nil {
				return fmt.Errorf("encode the pieces of the stream of %s: %w", task, err)
			}
			tag, err := tx.Exec(ctx, `UPDATE stream_batches SET map_key = $4, pieces = $5, vtt_key = $6, made_at = now()
				WHERE task_id = $1 AND from_ms = $2 AND to_ms = $3`, task, b.FromMS, b.ToMS, b.MapKey, pieces, b.VTTKey)
			if err != nil {
				return fmt.Errorf("replace a batch of the stream of %s: %w", task, err)
			}
			if tag.RowsAffected() != 1 {
				return fmt.Errorf("the stream of %s has no batch %d..%d ms", task, b.FromMS, b.ToMS)
			}
		}
		_, err := tx.Exec(ctx, `UPDATE task_streams SET version = greatest(version, $2), updated_at = now() WHERE task_id = $1`, task, v)
		if err != nil {
			return fmt.Errorf("record version %d of the stream of %s: %w", v, task, err)
		}
		return nil
	})
}
