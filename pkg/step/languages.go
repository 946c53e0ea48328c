package step

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/dubflow/dubflow/pkg/blob"

	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/store"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

// This file is the fan-out per language of a task that dubs into several
// languages at once (a parent, task.Spawn). The parent runs extract_audio
// and asr once, as any task; what its asr parts stage for the rest of the
// chain (translate batches, the tts fan-in) is taken out of their success
// transactions here, and the part that completes the asr step — the whole
// audio when it was not cut into chunks, else the merge — spawns in its
// transaction one child task per language and emits the children's
// translate batches. Each child then runs translate → tts → mux_video on
// the usual machinery. The asr handler knows nothing of it.
//
// A child's mux_video reads the video from the child's own key
// (videos/{child}/source.mp4, checked against the child's id like every
// key). The part that spawns the children puts it there first: a
// server-side copy of the parent's video per language (Config.Objects),
// before the transaction that spawns the children and emits their first
// messages commits. Nothing of a child can run before its video is in
// place, a copy repeated on a redelivery or a replay rewrites the same
// bytes, an outage of the store hands the step back like any other
// (fault.Unavailable), and a parent whose video is gone fails its asr
// step for good (each child would fail at its mux otherwise).

// defaultLanguageBatch is the number of segments per child translate
// message when the part that spawns the children staged no batches to learn
// TRANSLATE_BATCH_SIZE from (the merge of a chunked audio).
const defaultLanguageBatch = 20

// emitNewPartSQL registers a part with its message and adds the message to
// the outbox only if the part was not registered before, returning the
// outbox id or NULL (arguments: task, step, part, body, message id,
// exchange, routing key). A replayed fan-in emits nothing twice.
const emitNewPartSQL = `WITH part AS (
	INSERT INTO step_parts (task_id, step, part, message) VALUES ($1, $2, $3, $4)
	ON CONFLICT DO NOTHING RETURNING 1
), sent AS (
	INSERT INTO outbox (message_id, exchange, routing_key, body)
	SELECT $5, $6, $7, $4 FROM part RETURNING id
)
SELECT (SELECT id FROM sent)`

// fansOutLanguages reports whether env's step is the one a task with
// several languages fans out after: its claim reads the task's targets
// along (store.QueueClaimStep), so that fanOutLanguages costs no round trip.
func fansOutLanguages(env *wire.Envelope) bool { return env.Step == wire.StepASR }

// fanOutLanguages rewrites what an asr part of a parent task staged: the
// translate and tts messages go, and the part that completes the step
// spawns the children and emits their translate batches. A task with one
// language (no targets, read with the claim) is left alone.
func (r *Runner) fanOutLanguages(ctx context.Context, msg *Message, targets []string) error {
	env := msg.Envelope
	if !fansOutLanguages(env) || len(targets) == 0 {
		return nil
	}
	var p wire.ASR
	if err := msg.Decode(&p); err != nil {
		return err
	}
	st, err := dropChain(msg)
	if err != nil {
		return err
	}
	complete := p.Merge || (p.Chunk == nil && !st.fansOut)
	if !complete || st.finished {
		return nil
	}
	if p.Merge {
		if st.segs, err = segmentIDs(ctx, r.cfg.Pool, env); err != nil {
			return err
		}
		st.batch = 0
	}
	if len(st.segs) == 0 {
		return nil
	}
	if st.batch <= 0 {
		st.batch = defaultLanguageBatch
	}
	if err := r.placeVideos(ctx, env.TaskID, targets); err != nil {
		return err
	}
	for _, language := range targets {
		if err := spawnChild(msg, p.Language, language, st.segs, st.batch); err != nil {
			return err
		}
	}
	msg.Log.Info().Strs("languages", targets).Int("segments", len(st.segs)).Msg("transcribed once; one child task per language")
	return nil
}

// staged is what dropChain learnt from an asr part's staged statements.
type staged struct {
	segs     []string // the segments of the staged translate batches
	batch    int      // the largest staged batch
	fansOut  bool     // the part cut the audio into chunks
	finished bool     // the part ended the task (no speech)
}

// dropChain removes the translate and tts messages an asr part of a parent
// task staged (its children translate instead) and says what they held.
func dropChain(msg *Message) (staged, error) {
	var st staged
	kept := msg.stmts[:0:0]
	for _, s := range msg.stmts {
		switch next := stagedStep(s); {
		case next == wire.StepTranslate:
			if s.sql == store.AddPartSQL {
				var t struct {
					Payload wire.Translate `json:"payload"`
				}
				if err := json.Unmarshal(s.args[3].([]byte), &t); err != nil {
					return st, fmt.Errorf("read staged translate message: %w", err)
				}
				st.segs = append(st.segs, t.Payload.SegmentIDs...)
				st.batch = max(st.batch, t.Payload.BatchSize, len(t.Payload.SegmentIDs))
			}
			continue
		case next == wire.StepTTS:
			continue
		case next == wire.StepASR:
			st.fansOut = true
		case s.transition != nil && s.transition.Name == "succeed":
			st.finished = true
		}
		kept = append(kept, s)
	}
	msg.stmts = kept
	return st, nil
}

// spawnChild stages the child task of one language and its translate
// batches, each registered and sent only if it was not before.
func spawnChild(msg *Message, source, language string, segs []string, batch int) error {
	env := msg.Envelope
	msg.Apply(task.Spawn(task.RefOf(env), language))
	child := wire.ChildTaskID(env.TaskID, language)
	for lo := 0; lo < len(segs); lo += batch {
		ids := segs[lo:min(lo+batch, len(segs))]
		next, err := wire.New(wire.StepTranslate, child, env.TraceID, wire.Translate{TaskID: child, SegmentIDs: ids,
			SourceLanguage: source, TargetLanguage: language, BatchSize: batch})
		if err != nil {
			return fmt.Errorf("build translate message of %s: %w", language, err)
		}
		body, err := next.Marshal()
		if err != nil {
			return fmt.Errorf("encode translate message of %s: %w", language, err)
		}
		o := outbox.New(wire.Exchange, next.RoutingKey(), body)
		msg.stmts = append(msg.stmts, stmt{sql: emitNewPartSQL,
			args:   []any{child, wire.StepTranslate, wire.PartByIDs(ids), body, o.MessageID, o.Exchange, o.RoutingKey},
			outbox: o})
	}
	return nil
}

// Copier copies an object of one task to the key of another, server-side
// (blob.Store.Copy).
type Copier interface {
	Copy(ctx context.Context, kind string, src, dst blob.Ref) error
}

// placeVideos copies the parent's source video to the source key of the
// child of each language, the key Spawn records as the child's
// source_video_key.
func (r *Runner) placeVideos(ctx context.Context, parent uuid.UUID, targets []string) error {
	if r.cfg.Objects == nil {
		return errors.New("several languages: this runner has no object store to place the children's videos")
	}
	var key *string
	err := r.cfg.Pool.QueryRow(ctx, `SELECT source_video_key FROM tasks WHERE id = $1`, parent).Scan(&key)
	if err != nil {
		return fmt.Errorf("read the source video of %s: %w", parent, err)
	}
	src := blob.Ref{Task: parent, Key: wire.DefaultKeys(parent).SourceVideo}
	if key != nil && *key != "" {
		src.Key = *key
	}
	for _, language := range targets {
		child := wire.ChildTaskID(parent, language)
		dst := blob.Ref{Task: child, Key: wire.DefaultKeys(child).SourceVideo}
		if err := r.cfg.Objects.Copy(ctx, wire.KindVideo, src, dst); err != nil {
			return fmt.Errorf("place the video of the %s child: %w", language, err)
		}
	}
	return nil
}

// stagedStep names the step whose message s emits or registers, "" for
// any other statement.
func stagedStep(s stmt) string {
	switch {
	case s.sql == store.AddPartSQL:
		step, _ := s.args[1].(string)
		return step
	case s.sql == holdSQL || s.sql == releaseSQL:
		step, _ := s.args[1].(string)
		return step
	case s.outbox != nil && s.transition == nil:
		for _, step := range wire.Pipeline {
			if s.outbox.RoutingKey == wire.RoutingKey(step) {
				return step
			}
		}
	}
	return ""
}

// segmentIDs lists the task's segments, in order.
func segmentIDs(ctx context.Context, q Querier, env *wire.Envelope) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT idx FROM segments WHERE task_id = $1 ORDER BY idx`, env.TaskID)
	if err != nil {
		return nil, fmt.Errorf("read segments of %s: %w", env.TaskID, err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var idx int
		if err := rows.Scan(&idx); err != nil {
			return nil, fmt.Errorf("read segments of %s: %w", env.TaskID, err)
		}
		ids = append(ids, wire.SegmentID(idx))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read segments of %s: %w", env.TaskID, err)
	}
	return ids, nil
}
