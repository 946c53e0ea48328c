package task_test

import (
	"context"
	"io"
	"testing"

	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// answerLost is the error of a COMMIT whose connection broke before the
// answer came: pgx says it is not safe to retry, its outcome is unknown.
type answerLost struct{}

func (answerLost) Error() string     { return "commit: unexpected EOF" }
func (answerLost) SafeToRetry() bool { return false }
func (answerLost) Unwrap() error     { return io.ErrUnexpectedEOF }

// losingCommits begins transactions on pool whose first commits lose their
// answer: applied (applied set) or not, the caller gets answerLost.
type losingCommits struct {
	pool    *pgxpool.Pool
	lose    int
	applied bool
}

func (b *losingCommits) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &losingTx{Tx: tx, b: b}, nil
}

type losingTx struct {
	pgx.Tx
	b *losingCommits
}

func (t *losingTx) Commit(ctx context.Context) error {
	if t.b.lose == 0 {
		return t.Tx.Commit(ctx)
	}
	t.b.lose--
	if !t.b.applied {
		_ = t.Tx.Rollback(ctx)
		return answerLost{}
	}
	if err := t.Tx.Commit(ctx); err != nil {
		return err
	}
	return answerLost{}
}

// A submission whose commit's answer is lost (the primary went away as it
// committed) is resolved by reading: applied or not, the task exists once,
// with one first message, and the submission succeeds.
func TestSubmitWhoseCommitAnswerIsLostCreatesTheTaskOnce(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	for _, applied := range []bool{true, false} {
		id := uuid.New()
		p := wire.ExtractAudio{SourceVideoKey: wire.DefaultKeys(id).SourceVideo, OutputAudioKey: wire.DefaultKeys(id).SourceAudio,
			SourceLanguage: "en", TargetLanguage: "es"}
		env, err := wire.New(wire.StepExtractAudio, id, "", p)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := task.Submit(ctx, &losingCommits{pool: db.Pool, lose: 1, applied: applied}, env, p, "clip.mp4")
		if err != nil {
			t.Fatalf("applied %t: submit: %v", applied, err)
		}
		if applied != (ids == nil) {
			t.Errorf("applied %t: outbox ids %v: the earlier try's rows are the sweep's, a new try's are returned", applied, ids)
		}
		var tasks, firsts int
		if err := db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM tasks WHERE id = $1),
			(SELECT count(*) FROM outbox WHERE routing_key = $2 AND convert_from(body, 'UTF8')::jsonb->>'task_id' = $1::text)`,
			id, env.RoutingKey()).Scan(&tasks, &firsts); err != nil {
			t.Fatal(err)
		}
		if tasks != 1 || firsts != 1 {
			t.Errorf("applied %t: %d tasks, %d first messages; want 1 and 1", applied, tasks, firsts)
		}
	}
}

// A task's success for one output is announced under one id however often
// it is reached: an asynchronous database's failover may lose the commit
// that announced it, and the step that reaches it again announces it
// again, under the same id. Another output (a re-dub's) has another.
func TestASuccessIsAnnouncedUnderOneIDPerOutput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ a, b string }{{"outputs/x/final.mp4", "outputs/x/final.mp4"}, {"", ""}} {
		if task.SucceededEventID(uuid.Nil, tc.a) != task.SucceededEventID(uuid.Nil, tc.b) {
			t.Errorf("%q and %q: two ids", tc.a, tc.b)
		}
	}
	id := uuid.New()
	if task.SucceededEventID(id, "outputs/x/final.mp4") == task.SucceededEventID(id, "outputs/x/v2/final.mp4") ||
		task.SucceededEventID(id, "") == task.SucceededEventID(uuid.New(), "") {
		t.Error("two outputs, or two tasks, share a success id")
	}
	db := testenv.Postgres(t)
	ctx := context.Background()
	for range 2 { // the second time as after a lost commit: the row is running again
		if _, err := db.Pool.Exec(ctx, `INSERT INTO tasks (id, status) VALUES ($1, 'running')
			ON CONFLICT (id) DO UPDATE SET status = 'running'`, id); err != nil {
			t.Fatal(err)
		}
		apply(t, ctx, db.Pool, task.Succeed(task.Ref{ID: id, Step: wire.StepMuxVideo}, nil, "outputs/x/final.mp4"))
	}
	var ids []uuid.UUID
	for _, e := range events(t, db.Pool, id) {
		if e.Event == wire.EventTaskSucceeded {
			ids = append(ids, e.EventID)
		}
	}
	if len(ids) != 2 || ids[0] != ids[1] || ids[0] != task.SucceededEventID(id, "outputs/x/final.mp4") {
		t.Fatalf("success events %v: want two announcements under the one id %s", ids, task.SucceededEventID(id, "outputs/x/final.mp4"))
	}
}
