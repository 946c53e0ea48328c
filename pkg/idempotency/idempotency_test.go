package idempotency_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/idempotency"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/google/uuid"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, 4)) }

const poll = 20 * time.Millisecond

// TestAKeyAnswersItsFirstRequest: a key is claimed once; the same request
// again gets the first answer, another request is refused, a refused
// request's key is judged afresh, an expired key starts afresh and is
// swept.
func TestAKeyAnswersItsFirstRequest(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t).Pool
	ctx := context.Background()
	k := idempotency.Key{Principal: "admin", Key: "upload-1"}
	first := uuid.New()
	owned, id, _, err := idempotency.Begin(ctx, db, k, []byte("fp"), first, poll)
	if err != nil || !owned || id != first {
		t.Fatalf("first Begin: owned %v id %s %v, want owned %s", owned, id, err, first)
	}
	if err := idempotency.Finish(ctx, db, k, idempotency.Answer{TaskID: first, Status: 201, Body: []byte(`{"taskId":"x"}`)}); err != nil {
		t.Fatal(err)
	}
	owned, _, a, err := idempotency.Begin(ctx, db, k, []byte("fp"), uuid.New(), poll)
	if err != nil || owned || a.TaskID != first || a.Status != 201 || string(a.Body) != `{"taskId":"x"}` {
		t.Fatalf("again: owned %v answer %+v (%s) %v, want the first answer", owned, a, a.Body, err)
	}
	if _, _, _, err := idempotency.Begin(ctx, db, k, []byte("other"), uuid.New(), poll); !errors.Is(err, idempotency.ErrReused) {
		t.Fatalf("another request: %v, want ErrReused", err)
	}
	other := idempotency.Key{Principal: "ci", Key: "upload-1"}
	if owned, _, _, err := idempotency.Begin(ctx, db, other, []byte("other"), uuid.New(), poll); err != nil || !owned {
		t.Fatalf("the same key of another principal: owned %v %v, want its own", owned, err)
	}
	if err := idempotency.Abandon(ctx, db, other); err != nil {
		t.Fatal(err)
	}
	if owned, _, _, err := idempotency.Begin(ctx, db, other, []byte("third"), uuid.New(), poll); err != nil || !owned {
		t.Fatalf("after a refusal: owned %v %v, want it judged afresh", owned, err)
	}
	if _, err := db.Exec(ctx, `UPDATE idempotency_keys SET expires_at = now() - interval '1 second' WHERE principal = 'admin'`); err != nil {
		t.Fatal(err)
	}
	fresh := uuid.New()
	if owned, id, _, err := idempotency.Begin(ctx, db, k, []byte("new"), fresh, poll); err != nil || !owned || id != fresh {
		t.Fatalf("expired key: owned %v id %s %v, want a fresh claim", owned, id, err)
	}
	if _, err := db.Exec(ctx, `UPDATE idempotency_keys SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	if n, err := idempotency.Sweep(ctx, db); err != nil || n != 2 {
		t.Fatalf("sweep: %d %v, want 2 rows", n, err)
	}
}

// TestConcurrentRequestsWithOneKeyShareOneAnswer: requests arriving while
// the first is in flight wait for its answer; none of them owns the key.
func TestConcurrentRequestsWithOneKeyShareOneAnswer(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t).Pool
	ctx := context.Background()
	k := idempotency.Key{Principal: "admin", Key: "k"}
	task := uuid.New()
	owned, _, _, err := idempotency.Begin(ctx, db, k, []byte("fp"), task, poll)
	if err != nil || !owned {
		t.Fatalf("first: %v %v", owned, err)
	}
	var wg sync.WaitGroup
	results := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owned, _, a, err := idempotency.Begin(ctx, db, k, []byte("fp"), uuid.New(), poll)
			if err == nil && (owned || a.TaskID != task || a.Status != 201) {
				err = errors.New("a concurrent request owned the key or got another answer")
			}
			results <- err
		}()
	}
	if err := idempotency.Finish(ctx, db, k, idempotency.Answer{TaskID: task, Status: 201, Body: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(results)
	for err := range results {
		if err != nil {
			t.Error(err)
		}
	}
}

// TestAStaleFirstRequestIsTakenOverWithItsTask: a first request in flight
// for longer than StaleAfter (its process died) is taken over by the next
// request with the same fingerprint, which creates the task the first one
// reserved.
func TestAStaleFirstRequestIsTakenOverWithItsTask(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t).Pool
	ctx := context.Background()
	k := idempotency.Key{Principal: "admin", Key: "k"}
	reserved := uuid.New()
	if owned, _, _, err := idempotency.Begin(ctx, db, k, []byte("fp"), reserved, poll); err != nil || !owned {
		t.Fatalf("first: %v %v", owned, err)
	}
	if _, err := db.Exec(ctx, `UPDATE idempotency_keys SET created_at = now() - interval '2 hours'`); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := idempotency.Begin(ctx, db, k, []byte("other"), uuid.New(), poll); !errors.Is(err, idempotency.ErrReused) {
		t.Fatalf("another request: %v, want ErrReused even for a stale key", err)
	}
	owned, id, _, err := idempotency.Begin(ctx, db, k, []byte("fp"), uuid.New(), poll)
	if err != nil || !owned || id != reserved {
		t.Fatalf("take-over: owned %v id %s %v, want owned with %s", owned, id, err, reserved)
	}
}

func TestCheckKey(t *testing.T) {
	t.Parallel()
	for k, ok := range map[string]bool{"a": true, "2024-06-01/upload.mp4#1": true, "": false, "with space": false,
		"tab\t": false, "é": false, string(make([]byte, 256)): false} {
		if err := idempotency.CheckKey(k); (err == nil) != ok {
			t.Errorf("CheckKey(%q) = %v, want ok %v", k, err, ok)
		}
	}
}
