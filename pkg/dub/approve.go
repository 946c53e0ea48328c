package dub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/dubflow/dubflow/pkg/internal/attempt"
	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/review"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

// DefaultBatchSize is how many lines an approval puts in one translate
// message when the caller names no size (TRANSLATE_BATCH_SIZE's default).
const DefaultBatchSize = 20

// Approved is what an approval started.
type Approved struct {
	TaskID uuid.UUID `json:"taskId"`
	// Stage is the stage approved (transcript, translation).
	Stage string `json:"stage"`
	// Lines is how many lines go on; Batches how many translate messages
	// carry them (each translates those of its lines without a
	// translation, then sends their tts part).
	Lines   int         `json:"lines"`
	Batches int         `json:"batches"`
	Edit    review.Edit `json:"edit"`
	// Outbox lists the committed outbox rows (the task.approved event and
	// the translate messages): publish them with outbox.Flush, or leave
	// them to a worker's sweep.
	Outbox []int64 `json:"-"`
}

// Approve lets task id, in review, go on with its lines as they are: in one
// transaction the task goes running (task.Approve, event task.approved),
// the approval is recorded by actor, and one translate message per
// batchSize lines (DefaultBatchSize when 0) is added to the outbox and
// registered as a part of the translate step (attempt.AddPart, with the
// message for re-drives), so that the chain continues where it stopped,
// exactly once, across restarts, as any step's hand-off does. Each batch
// translates those of its lines that have no translation (all of them
// after the transcript's review; after the translation's, the lines whose
// source was edited) and sends their tts part; the last tts part sends
// mux_video. After the transcript's review of a task that also reviews its
// translation, the batches (revision 0) stop the task in review again once
// translated; after the translation's, they are revision 1 and never do.
// A task not in review is ErrNotInReview; one without lines ErrNoLines.
func Approve(ctx context.Context, db Beginner, id uuid.UUID, actor string, batchSize int) (*Approved, error) {
	if batchSize < 1 {
		batchSize = DefaultBatchSize
	}
	var out *Approved
	err := inReview(ctx, db, id, func(s *session) error {
		if len(s.lines) == 0 {
			return fmt.Errorf("approve task %s: %w: every line was deleted; import lines or cancel the task", id, ErrNoLines)
		}
		res, err := task.Apply(ctx, s.tx, task.Approve(task.Ref{ID: id}, s.stage))
		var refused *task.RefusedError
		if errors.As(err, &refused) {
			return fmt.Errorf("approve task %s: it is %s: %w", id, refused.From, ErrNotInReview)
		}
		if err != nil {
			return err
		}
		out = &Approved{TaskID: id, Stage: s.stage, Lines: len(s.lines), Outbox: []int64{res.EventID}}
		ids, err := s.sendBatches(ctx, batchSize)
		if err != nil {
			return err
		}
		out.Batches, out.Outbox = len(ids), append(out.Outbox, ids...)
		out.Edit, err = s.record(ctx, actor, ActionApprove, nil, nil, nil)
		return err
	})
	return out, err
}

// sendBatches adds the translate messages of the task's lines to the
// outbox, registered as parts of the translate step, and returns their
// outbox rows.
func (s *session) sendBatches(ctx context.Context, size int) ([]int64, error) {
	var source, target, trace string
	if err := s.tx.QueryRow(ctx, `SELECT source_language, target_language, trace_id FROM tasks WHERE id = $1`, s.id).
		Scan(&source, &target, &trace); err != nil {
		return nil, fmt.Errorf("read task %s: %w", s.id, err)
	}
	revision := 0
	if s.stage == task.StageTranslation {
		revision = 1
	}
	var out []int64
	for batch := range slices.Chunk(s.lines, size) {
		ids := make([]string, len(batch))
		for i, l := range batch {
			ids[i] = wire.SegmentID(l.idx)
		}
		p := wire.Translate{TaskID: s.id, SegmentIDs: ids, SourceLanguage: source, TargetLanguage: target,
			BatchSize: size, Revision: revision}
		env, err := wire.New(wire.StepTranslate, s.id, trace, p)
		if err != nil {
			return nil, fmt.Errorf("build translate message of %s: %w", s.id, err)
		}
		body, err := json.Marshal(env)
		if err != nil {
			return nil, fmt.Errorf("encode translate message of %s: %w", s.id, err)
		}
		if err := attempt.AddPart(s.id, wire.StepTranslate, p.Part(), body).Exec(ctx, s.tx); err != nil {
			return nil, fmt.Errorf("record translate part of %s: %w", s.id, err)
		}
		o := outbox.New(wire.Exchange, wire.RoutingKey(wire.StepTranslate), body)
		if err := outbox.Add(ctx, s.tx, o); err != nil {
			return nil, err
		}
		out = append(out, o.ID)
	}
	return out, nil
}
