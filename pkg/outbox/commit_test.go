package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/jackc/pgx/v5"
)

// TestCommitPublishesAfterTheCommitOnly: what fn adds is published, in
// order, once its transaction committed; a failing fn publishes nothing and
// leaves nothing; a publish that fails after the commit is ErrUnpublished
// and its row stays for the sweep.
func TestCommitPublishesAfterTheCommitOnly(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	stage := func(keys ...string) func(tx pgx.Tx) ([]int64, error) {
		return func(tx pgx.Tx) ([]int64, error) {
			ids := []int64{0} // a transition without an event: skipped
			for _, k := range keys {
				m := outbox.New(wire.Exchange, k, []byte(fmt.Sprintf(`{"key":%q}`, k)))
				if err := outbox.Add(ctx, tx, m); err != nil {
					return nil, err
				}
				ids = append(ids, m.ID)
			}
			return ids, nil
		}
	}
	pub := &recorder{okBefore: -1}
	if err := outbox.Commit(ctx, db.Pool, pub, stage("task.asr", "task.translate")); err != nil {
		t.Fatal(err)
	}
	if got := pub.published(); fmt.Sprint(got) != "[task.asr task.translate]" {
		t.Fatalf("published %v, want both messages in order", got)
	}
	if n := rows(t, db.Pool); n != 0 {
		t.Fatalf("rows left after a published commit = %d", n)
	}

	errStop := errors.New("refused")
	err := outbox.Commit(ctx, db.Pool, pub, func(tx pgx.Tx) ([]int64, error) {
		ids, err := stage("task.tts")(tx)
		if err != nil {
			return nil, err
		}
		return ids, errStop
	})
	if !errors.Is(err, errStop) || errors.Is(err, outbox.ErrUnpublished) {
		t.Fatalf("a failing fn: %v, want its own error", err)
	}
	if got := pub.published(); len(got) != 2 || rows(t, db.Pool) != 0 {
		t.Fatalf("a rolled back commit published %v and left %d rows", got, rows(t, db.Pool))
	}

	down := &recorder{okBefore: 0}
	err = outbox.Commit(ctx, db.Pool, down, stage("task.mux_video"))
	if !errors.Is(err, outbox.ErrUnpublished) {
		t.Fatalf("a publish failing after the commit: %v, want ErrUnpublished", err)
	}
	if n := rows(t, db.Pool); n != 1 {
		t.Fatalf("rows left = %d, want the committed message waiting for the sweep", n)
	}
}
