package agentqueue_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/services/dispatcher/internal/agentqueue"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

func setup(t *testing.T, capacity int) (*agentqueue.Queue, *pgxpool.Pool) {
	t.Helper()
	db := testenv.Postgres(t)
	return agentqueue.New(db.Pool, capacity), db.Pool
}

// checkSizes fails the test unless every agent's stored queue_size equals
// its number of queued items and none is over capacity.
func checkSizes(t *testing.T, pool *pgxpool.Pool, capacity int) {
	t.Helper()
	var bad int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM agent_queues a
		WHERE a.queue_size > $1 OR a.queue_size <> (SELECT count(*) FROM agent_queue_items i
		                           WHERE i.agent_id = a.agent_id AND i.status = 'queued')`, capacity).Scan(&bad); err != nil {
		t.Fatal(err)
	}
	if bad != 0 {
		t.Fatalf("%d agents whose queue_size is over capacity or differs from their queued items", bad)
	}
}

func TestEnqueueConsumeCancelKeepTheQueueRight(t *testing.T) {
	t.Parallel()
	const capacity = 3
	q, pool := setup(t, capacity)
	ctx := context.Background()
	agent := uuid.New()
	orders := []uuid.UUID{uuid.New(), uuid.New(), uuid.New()}
	for i, o := range orders {
		it, err := q.Enqueue(ctx, agent, o, uuid.New(), "user-1")
		if err != nil || it.Position != i+1 || it.Status != agentqueue.StatusQueued {
			t.Fatalf("enqueue %d: %+v %v", i, it, err)
		}
		checkSizes(t, pool, capacity)
	}
	// Full: a new order is refused.
	if _, err := q.Enqueue(ctx, agent, uuid.New(), uuid.New(), "user-1"); !errors.Is(err, agentqueue.ErrQueueFull) {
		t.Fatalf("enqueue into a full queue: %v, want ErrQueueFull", err)
	}
	// Another agent's queue is its own.
	if _, err := q.Enqueue(ctx, uuid.New(), orders[0], uuid.New(), "user-1"); err != nil {
		t.Fatalf("same order for another agent: %v", err)
	}
	st, err := q.Status(ctx, agent, 1000)
	if err != nil || st.QueuedCount != 3 || st.Capacity != 3 || st.Available != 0 || len(st.Items) != 3 {
		t.Fatalf("status: %+v %v", st, err)
	}
	for i, it := range st.Items {
		if it.OrderID != orders[i] || it.Position != i+1 {
			t.Fatalf("status item %d: %+v, want order %s at %d", i, it, orders[i], i+1)
		}
	}
	// A limit bounds the items, not the counts.
	if st, err := q.Status(ctx, agent, 2); err != nil || st.QueuedCount != 3 || len(st.Items) != 2 || st.Items[1].OrderID != orders[1] {
		t.Fatalf("status with limit 2: %+v %v", st, err)
	}

	// Cancel the middle one (twice: the second is a quiet no-op), and an
	// unknown one.
	for i, want := range []bool{true, false} {
		if done, err := q.Cancel(ctx, agent, orders[1], "user-1"); err != nil || done != want {
			t.Fatalf("cancel #%d: %v %v, want %v", i+1, done, err, want)
		}
	}
	if done, err := q.Cancel(ctx, agent, uuid.New(), "user-1"); err != nil || done {
		t.Fatalf("cancel of an unknown order: %v %v", done, err)
	}
	checkSizes(t, pool, capacity)
	if pos, err := q.Position(ctx, agent, orders[2]); err != nil || pos != 2 {
		t.Fatalf("position of the third order after the second's cancel: %d %v, want 2", pos, err)
	}
	if _, err := q.Position(ctx, agent, orders[1]); !errors.Is(err, agentqueue.ErrNotQueued) {
		t.Fatalf("position of a cancelled order: %v, want ErrNotQueued", err)
	}

	// Duplicate of a queued order: refused.
	if _, err := q.Enqueue(ctx, agent, orders[0], uuid.New(), "user-1"); !errors.Is(err, agentqueue.ErrDuplicate) {
		t.Fatalf("duplicate enqueue: %v, want ErrDuplicate", err)
	}
	checkSizes(t, pool, capacity)

	// Consume: oldest first, then empty.
	for _, want := range []uuid.UUID{orders[0], orders[2]} {
		it, ok, err := q.ConsumeNext(ctx, agent)
		if err != nil || !ok || it.OrderID != want || it.Status != agentqueue.StatusConsumed || it.ConsumedAt == nil {
			t.Fatalf("consume: %+v %v %v, want order %s", it, ok, err, want)
		}
		checkSizes(t, pool, capacity)
	}
	if it, ok, err := q.ConsumeNext(ctx, agent); err != nil || ok {
		t.Fatalf("consume from an empty queue: %+v %v %v", it, ok, err)
	}
	// A consumed order is no longer queued: cancelling it changes nothing,
	// and it may be queued again.
	if done, err := q.Cancel(ctx, agent, orders[0], "user-1"); err != nil || done {
		t.Fatalf("cancel of a consumed order: %v %v", done, err)
	}
	if _, err := q.Enqueue(ctx, agent, orders[0], uuid.New(), "user-1"); err != nil {
		t.Fatalf("enqueue a consumed order again: %v", err)
	}
	checkSizes(t, pool, capacity)
	if st, _ := q.Status(ctx, agent, 1000); st.QueuedCount != 1 || st.Available != 2 {
		t.Fatalf("status at the end: %+v", st)
	}
}

// TestConcurrentConsumersGetEachItemOnce: many goroutines consume one
// agent's queue at once; every item is handed out exactly once, oldest
// first per consumer, and the queue ends empty with queue_size 0.
func TestConcurrentConsumersGetEachItemOnce(t *testing.T) {
	t.Parallel()
	const items, consumers = 300, 32
	q, pool := setup(t, items)
	ctx := context.Background()
	agent := uuid.New()
	arrival := map[uuid.UUID]int{}
	for i := 0; i < items; i++ {
		it, err := q.Enqueue(ctx, agent, uuid.New(), uuid.New(), "user-1")
		if err != nil {
			t.Fatal(err)
		}
		arrival[it.ID] = i
	}
	var mu sync.Mutex
	got := map[uuid.UUID]int{}
	var wg sync.WaitGroup
	for c := 0; c < consumers; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := -1
			for {
				it, ok, err := q.ConsumeNext(ctx, agent)
				if err != nil {
					t.Error(err)
					return
				}
				if !ok {
					return
				}
				if arrival[it.ID] <= last {
					t.Errorf("a consumer got item %d after item %d", arrival[it.ID], last)
				}
				last = arrival[it.ID]
				mu.Lock()
				got[it.ID]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for id, n := range got {
		if n != 1 {
			t.Fatalf("item %s handed out %d times", id, n)
		}
	}
	// A consumer gives up only when it finds nothing to take: with every
	// consumer gone, nothing may be left.
	var left, consumed int
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'queued'),
		count(*) FILTER (WHERE status = 'consumed') FROM agent_queue_items`).Scan(&left, &consumed); err != nil {
		t.Fatal(err)
	}
	if len(got) != items || consumed != items || left != 0 {
		t.Fatalf("%d distinct items handed out, %d consumed, %d left; want %d, %d, 0", len(got), consumed, left, items, items)
	}
	checkSizes(t, pool, items)
}

// TestEnqueueRaceNeverExceedsCapacity: many goroutines enqueue distinct
// orders for one agent at once; exactly capacity succeed. Racing duplicates
// of one order: exactly one succeeds.
func TestEnqueueRaceNeverExceedsCapacity(t *testing.T) {
	t.Parallel()
	const capacity, racers = 10, 100
	q, pool := setup(t, capacity)
	ctx := context.Background()
	agent := uuid.New()
	race := func(order func(i int) uuid.UUID) (ok, full, dup int) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := 0; i < racers; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := q.Enqueue(ctx, agent, order(i), uuid.New(), "user-1")
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					ok++
				case errors.Is(err, agentqueue.ErrQueueFull):
					full++
				case errors.Is(err, agentqueue.ErrDuplicate):
					dup++
				default:
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		return ok, full, dup
	}
	if ok, full, dup := race(func(int) uuid.UUID { return uuid.New() }); ok != capacity || full != racers-capacity || dup != 0 {
		t.Fatalf("distinct orders: %d queued, %d full, %d duplicate; want %d, %d, 0", ok, full, dup, capacity, racers-capacity)
	}
	checkSizes(t, pool, capacity)

	// Empty the queue with concurrent consumers, then race one order.
	var wg sync.WaitGroup
	for i := 0; i < capacity; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, ok, err := q.ConsumeNext(ctx, agent); err != nil || !ok {
				t.Errorf("consume: %v %v", ok, err)
			}
		}()
	}
	wg.Wait()
	checkSizes(t, pool, capacity)
	one := uuid.New()
	if ok, full, dup := race(func(int) uuid.UUID { return one }); ok != 1 || full != 0 || dup != racers-1 {
		t.Fatalf("one order raced: %d queued, %d full, %d duplicate; want 1, 0, %d", ok, full, dup, racers-1)
	}
	checkSizes(t, pool, capacity)
}

// TestMixedConcurrencyKeepsQueueSize: enqueues, consumes and cancels of one
// agent's queue at once; queue_size always ends equal to the queued items
// and never over capacity.
func TestMixedConcurrencyKeepsQueueSize(t *testing.T) {
	t.Parallel()
	const capacity = 5
	q, pool := setup(t, capacity)
	ctx := context.Background()
	agent := uuid.New()
	orders := make([]uuid.UUID, 20)
	for i := range orders {
		orders[i] = uuid.New()
	}
	var wg sync.WaitGroup
	for g := 0; g < 12; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				o := orders[(g*7+i)%len(orders)]
				var err error
				switch (g + i) % 3 {
				case 0:
					_, err = q.Enqueue(ctx, agent, o, uuid.New(), "user-1")
					if errors.Is(err, agentqueue.ErrQueueFull) || errors.Is(err, agentqueue.ErrDuplicate) {
						err = nil
					}
				case 1:
					_, _, err = q.ConsumeNext(ctx, agent)
				case 2:
					_, err = q.Cancel(ctx, agent, o, "user-1")
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	checkSizes(t, pool, capacity)
}
