package deadletter_test

import (
	"context"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/internal/deadletter"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// TestInsertKeepsWhatJSONBRefusesAsBytesAndRecordsOnce: an original that
// jsonb refuses (a \u0000 in a string) is recorded with its raw bytes and
// no original_message, in the caller's transaction; a second record of the
// same message id records nothing; a zero FailedAt is the time of the
// insert.
func TestInsertKeepsWhatJSONBRefusesAsBytesAndRecordsOnce(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	task := uuid.New()
	body := []byte(`{"task_id":"` + task.String() + `","note":"nul \u0000 here"}`)
	e := &deadletter.Entry{MessageID: "m-1", TaskID: &task, Step: "asr", Attempt: 2, ErrorClass: "permanent",
		Reason: "bad", Original: body, Raw: body, RoutingKey: "task.asr", Source: "service"}
	insert := func() int64 {
		var id int64
		if err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
			var err error
			id, err = deadletter.Insert(ctx, tx, e)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return id
	}
	id := insert()
	if id == 0 {
		t.Fatal("the first record returned no id")
	}
	var orig, raw []byte
	var failedAt time.Time
	if err := db.Pool.QueryRow(ctx, `SELECT original_message, raw_body, failed_at FROM dead_letters WHERE id = $1`, id).
		Scan(&orig, &raw, &failedAt); err != nil {
		t.Fatal(err)
	}
	if orig != nil || string(raw) != string(body) || time.Since(failedAt) > time.Minute {
		t.Fatalf("recorded original %q, raw %q, failed at %s; want no original, the raw body, now", orig, raw, failedAt)
	}
	if again := insert(); again != 0 {
		t.Fatalf("the same message id recorded again as %d", again)
	}
	e.MessageID, e.Original, e.Raw = "m-2", []byte(`{"task_id":"`+task.String()+`"}`), nil
	id = insert()
	if err := db.Pool.QueryRow(ctx, `SELECT original_message FROM dead_letters WHERE id = $1`, id).Scan(&orig); err != nil || orig == nil {
		t.Fatalf("a JSON original was not kept: %q, %v", orig, err)
	}
}
