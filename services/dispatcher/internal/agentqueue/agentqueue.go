// Package agentqueue is the per-agent queue (seed 002): orders waiting for
// one busy agent, at most a fixed number per agent, handed out oldest first
// and each exactly once. An item is either an outside order (posted for the
// agent, handed out by ConsumeNext) or a visitor who asked for the agent
// (EntryID: a waiting entry, queued by the waiting queue's transfer and
// paired by it when the agent has a free unit, never handed out here).
// Each item records who queued it (UserID); only they may cancel it. All
// state lives in Postgres (agent_queues, agent_queue_items); every
// guarantee holds with any number of dispatcher replicas:
//
//   - capacity: an enqueue raises the agent's queue_size with a conditional
//     update (queue_size < capacity) in the transaction that inserts the item,
//     so racing enqueues never exceed it;
//   - no duplicate: a unique partial index on (agent, order) of queued items;
//   - exactly once: consume-next claims the oldest queued item with FOR UPDATE
//     SKIP LOCKED and marks it consumed in one statement;
//   - queue_size: every status change of an item changes it in the same
//     transaction.
//
// Every transaction takes item rows before the agent's row, so no two of
// them wait on each other in a cycle.
package agentqueue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/store"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Errors callers branch on.
var (
	// ErrQueueFull: the agent already has Capacity queued items.
	ErrQueueFull = errors.New("agent queue is full")
	// ErrDuplicate: the order is already queued for the agent.
	ErrDuplicate = errors.New("order already queued for this agent")
	// ErrNotQueued: the order is not queued for the agent.
	ErrNotQueued = errors.New("order is not queued for this agent")
	// ErrNotOwner: the caller is not who queued the order (seed 002: only
	// the order's creator may cancel it).
	ErrNotOwner = errors.New("only who queued the order may do this")
)

// Status of an item.
const (
	StatusQueued    = "queued"
	StatusConsumed  = "consumed"
	StatusCancelled = "cancelled"
)

// Item is one order queued for an agent; JSON carries the API's camelCase
// names. Position is the live rank among the agent's queued items (1 = next)
// when the item is queued, 0 otherwise.
type Item struct {
	ID       uuid.UUID `json:"id"`
	AgentID  uuid.UUID `json:"agentId"`
	OrderID  uuid.UUID `json:"orderId"`
	TaskID   uuid.UUID `json:"taskId"`
	Status   string    `json:"status"`
	Position int       `json:"position"`
	// UserID is who queued it (the order's creator; for a visitor's
	// entry, the visitor's id); nil for items queued before owners were
	// recorded.
	UserID *string `json:"userId"`
	// EntryID is the waiting entry the item stands for (a visitor who
	// asked for this agent; OrderID and TaskID are the entry's id too):
	// the dispatcher pairs it when the agent has a free unit. Nil for an
	// outside order, which consume-next hands out.
	EntryID    *uuid.UUID `json:"entryId"`
	CreatedAt  time.Time  `json:"createdAt"`
	ConsumedAt *time.Time `json:"consumedAt"`
}

// QueueStatus is an agent's queue at one moment.
type QueueStatus struct {
	AgentID     uuid.UUID `json:"agentId"`
	QueuedCount int       `json:"queuedCount"`
	Capacity    int       `json:"capacity"`
	Available   int       `json:"available"`
	// Items are the first queued items in arrival order (at most the
	// limit asked for; QueuedCount counts them all).
	Items []Item `json:"items"`
}

// Queue is the per-agent queue on Postgres.
type Queue struct {
	pool     *pgxpool.Pool
	capacity int
}

// New returns a Queue on pool allowing capacity queued items per agent
// (QUEUE_MAX_N).
func New(pool *pgxpool.Pool, capacity int) *Queue {
	if capacity < 1 {
		capacity = 1
	}
	return &Queue{pool: pool, capacity: capacity}
}

// Capacity is the number of queued items an agent may have.
func (q *Queue) Capacity() int { return q.capacity }

const itemColumns = `id, agent_id, order_id, task_id, status, user_id, entry_id, created_at, consumed_at`

func scanItem(row pgx.Row) (Item, error) {
	var it Item
	err := row.Scan(&it.ID, &it.AgentID, &it.OrderID, &it.TaskID, &it.Status, &it.UserID, &it.EntryID,
		&it.CreatedAt, &it.ConsumedAt)
	return it, err
}

// User is the owner as stored: a user id that is a UUID in its canonical
// form is stored in lower case (a visitor's id is compared whatever case
// a header spells it in); any other id as given.
func User(s string) string {
	if id, err := uuid.Parse(s); err == nil && len(s) == 36 {
		return id.String()
	}
	return s
}

// Enqueue queues an outside order for agent on behalf of user (who alone
// may cancel it). It gives ErrDuplicate when the order is already queued
// for the agent and ErrQueueFull when the agent already has Capacity
// queued items.
func (q *Queue) Enqueue(ctx context.Context, agent, order, task uuid.UUID, user string) (Item, error) {
	var it Item
	err := pgx.BeginFunc(ctx, q.pool, func(tx pgx.Tx) error {
		var err error
		it, err = EnqueueIn(ctx, tx, q.capacity, NewOrder{Agent: agent, Order: order, Task: task, User: user})
		return err
	})
	if err != nil {
		return Item{}, err
	}
	return it, nil
}

// NewOrder is an item to queue.
type NewOrder struct {
	Agent, Order, Task uuid.UUID
	// User is who queues it (User normalises it).
	User string
	// Entry is the waiting entry the item stands for (Order and Task
	// must be its id); nil for an outside order.
	Entry *uuid.UUID
}

// EnqueueIn queues o inside tx, allowing capacity queued items per agent:
// ErrDuplicate when the order is already queued for the agent, ErrQueueFull
// when the agent's queue is full (the conditional update of queue_size on
// the agent's row decides, so racing enqueues never exceed it).
func EnqueueIn(ctx context.Context, tx pgx.Tx, capacity int, o NewOrder) (Item, error) {
	it, err := enqueueIn(ctx, tx, capacity, o)
	if err != nil {
		return Item{}, fmt.Errorf("enqueue order %s for agent %s: %w", o.Order, o.Agent, err)
	}
	return it, nil
}

func enqueueIn(ctx context.Context, tx pgx.Tx, capacity int, o NewOrder) (Item, error) {
	if _, err := tx.Exec(ctx, `INSERT INTO agent_queues (agent_id) VALUES ($1)
		ON CONFLICT (agent_id) DO NOTHING`, o.Agent); err != nil {
		return Item{}, err
	}
	// A duplicate aborts the transaction: the caller rolls it back.
	it, err := scanItem(tx.QueryRow(ctx, `INSERT INTO agent_queue_items (id, agent_id, order_id, task_id, user_id, entry_id)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING `+itemColumns, uuid.New(), o.Agent, o.Order, o.Task, User(o.User), o.Entry))
	var pg *pgconn.PgError
	if errors.As(err, &pg) && pg.Code == "23505" && pg.ConstraintName == "agent_queue_items_queued_order" {
		return Item{}, ErrDuplicate
	}
	if err != nil {
		return Item{}, err
	}
	tag, err := tx.Exec(ctx, `UPDATE agent_queues SET queue_size = queue_size + 1, updated_at = now()
		WHERE agent_id = $1 AND queue_size < $2`, o.Agent, capacity)
	if err != nil {
		return Item{}, err
	}
	if tag.RowsAffected() == 0 {
		return Item{}, ErrQueueFull
	}
	return it, tx.QueryRow(ctx, positionSQL, it.ID).Scan(&it.Position)
}

// positionSQL is the live position of a queued item (argument: item id).
const positionSQL = `SELECT count(*) FROM agent_queue_items o, agent_queue_items i
	WHERE i.id = $1 AND o.agent_id = i.agent_id AND o.status = 'queued' AND o.seq <= i.seq`

// itemColumnsQualified is itemColumns qualified by the alias i.
const itemColumnsQualified = `i.id, i.agent_id, i.order_id, i.task_id, i.status, i.user_id, i.entry_id,
	i.created_at, i.consumed_at`

// ConsumeNext hands out the agent's oldest queued outside order and marks
// it consumed; ok is false when the agent has none (or every queued one is
// being handed out to a concurrent caller). Each item is handed out once.
// A visitor's entry queued for the agent is never handed out here: the
// dispatcher pairs it itself when the agent has a free unit.
func (q *Queue) ConsumeNext(ctx context.Context, agent uuid.UUID) (it Item, ok bool, err error) {
	err = pgx.BeginFunc(ctx, q.pool, func(tx pgx.Tx) error {
		var err error
		it, err = scanItem(tx.QueryRow(ctx, `WITH next AS (
				SELECT id FROM agent_queue_items
				WHERE agent_id = $1 AND status = 'queued' AND entry_id IS NULL
				ORDER BY seq
				LIMIT 1
				FOR UPDATE SKIP LOCKED
			)
			UPDATE agent_queue_items i SET status = 'consumed', consumed_at = now(), updated_at = now()
			FROM next WHERE i.id = next.id AND i.status = 'queued'
			RETURNING `+itemColumnsQualified, agent))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		ok = true
		return Decrement(ctx, tx, agent, 1)
	})
	if err != nil {
		return Item{}, false, fmt.Errorf("consume next for agent %s: %w", agent, err)
	}
	return it, ok, nil
}

// Queued is the order's queued item in the agent's queue (ErrNotQueued
// when there is none): who queued it, and whether it stands for a
// visitor's entry.
func (q *Queue) Queued(ctx context.Context, agent, order uuid.UUID) (Item, error) {
	it, err := scanItem(q.pool.QueryRow(ctx, `SELECT `+itemColumns+` FROM agent_queue_items
		WHERE agent_id = $1 AND order_id = $2 AND status = 'queued'`, agent, order))
	if errors.Is(err, pgx.ErrNoRows) {
		err = ErrNotQueued
	}
	if err != nil {
		return Item{}, fmt.Errorf("order %s for agent %s: %w", order, agent, err)
	}
	return it, nil
}

// Cancel takes a queued outside order out of the agent's queue on behalf
// of user, who must be who queued it (ErrNotOwner otherwise; an item
// queued before owners were recorded may be cancelled by anyone). It
// reports whether it cancelled something: an unknown, consumed or already
// cancelled order is a quiet no-op. A visitor's entry is cancelled through
// its entry (the waiting queue's Cancel), never here.
func (q *Queue) Cancel(ctx context.Context, agent, order uuid.UUID, user string) (bool, error) {
	cancelled := false
	err := pgx.BeginFunc(ctx, q.pool, func(tx pgx.Tx) error {
		var owner *string
		err := tx.QueryRow(ctx, `SELECT user_id FROM agent_queue_items
			WHERE agent_id = $1 AND order_id = $2 AND status = 'queued' AND entry_id IS NULL
			FOR UPDATE`, agent, order).Scan(&owner)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if owner != nil && *owner != User(user) {
			return ErrNotOwner
		}
		if _, err := tx.Exec(ctx, `UPDATE agent_queue_items
			SET status = 'cancelled', cancelled_at = now(), cancelled_by = $3, updated_at = now()
			WHERE agent_id = $1 AND order_id = $2 AND status = 'queued'`, agent, order, user); err != nil {
			return err
		}
		cancelled = true
		return Decrement(ctx, tx, agent, 1)
	})
	if err != nil {
		return false, fmt.Errorf("cancel order %s for agent %s: %w", order, agent, err)
	}
	return cancelled, nil
}

// CancelEntryIn cancels the queued item standing for the waiting entry
// inside tx (the entry's cancellation, which locked the entry first),
// recording by, and lowers its agent's queue_size. An entry with no queued
// item is a no-op.
func CancelEntryIn(ctx context.Context, tx pgx.Tx, entry uuid.UUID, by string) error {
	var agent uuid.UUID
	err := tx.QueryRow(ctx, `UPDATE agent_queue_items
		SET status = 'cancelled', cancelled_at = now(), cancelled_by = $2, updated_at = now()
		WHERE entry_id = $1 AND status = 'queued'
		RETURNING agent_id`, entry, by).Scan(&agent)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cancel the queued item of entry %s: %w", entry, err)
	}
	return Decrement(ctx, tx, agent, 1)
}

// Decrement lowers the agent's queue_size by the n items that just left
// its queue inside tx (consumed, cancelled, paired or handed back).
func Decrement(ctx context.Context, tx pgx.Tx, agent uuid.UUID, n int) error {
	tag, err := tx.Exec(ctx, `UPDATE agent_queues SET queue_size = queue_size - $2, updated_at = now()
		WHERE agent_id = $1`, agent, n)
	if err == nil && tag.RowsAffected() != 1 {
		err = fmt.Errorf("agent %s has no queue row", agent)
	}
	return err
}

// Status reads the agent's queue from one snapshot: the counts, and its
// first limit queued items in arrival order. An agent never seen has an
// empty queue.
func (q *Queue) Status(ctx context.Context, agent uuid.UUID, limit int) (QueueStatus, error) {
	st := QueueStatus{AgentID: agent, Capacity: q.capacity, Items: []Item{}}
	opts := pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
	err := pgx.BeginTxFunc(ctx, q.pool, opts, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM agent_queue_items
			WHERE agent_id = $1 AND status = 'queued'`, agent).Scan(&st.QueuedCount); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT `+itemColumns+` FROM agent_queue_items
			WHERE agent_id = $1 AND status = 'queued' ORDER BY seq LIMIT $2`, agent, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			it, err := scanItem(rows)
			if err != nil {
				return err
			}
			it.Position = len(st.Items) + 1
			st.Items = append(st.Items, it)
		}
		return rows.Err()
	})
	if err != nil {
		return QueueStatus{}, fmt.Errorf("status of agent %s: %w", agent, err)
	}
	st.Available = max(0, q.capacity-st.QueuedCount)
	return st, nil
}

// Position is the order's live position in the agent's queue (1 = next);
// ErrNotQueued when the order is not queued for the agent.
func (q *Queue) Position(ctx context.Context, agent, order uuid.UUID) (int, error) {
	var pos int
	err := q.pool.QueryRow(ctx, `SELECT count(*) FROM agent_queue_items o
		JOIN agent_queue_items i ON o.agent_id = i.agent_id AND o.seq <= i.seq
		WHERE i.agent_id = $1 AND i.order_id = $2 AND i.status = 'queued' AND o.status = 'queued'`,
		agent, order).Scan(&pos)
	if err != nil {
		return 0, fmt.Errorf("position of order %s for agent %s: %w", order, agent, err)
	}
	if pos == 0 {
		return 0, fmt.Errorf("position of order %s for agent %s: %w", order, agent, ErrNotQueued)
	}
	return pos, nil
}

// RepairSizes sets queue_size to the number of queued items for every agent
// where they differ (a safety net run at start) and returns how many it
// changed. Each agent's row is locked before its items are counted, so a
// concurrent enqueue, consume or cancel is counted exactly once. Any number
// of replicas may run it at once.
func (q *Queue) RepairSizes(ctx context.Context) (int, error) {
	return queueSize.Repair(ctx, q.pool)
}

// queueSize is an agent's queue_size: the number of its queued items.
var queueSize = store.Counter{Name: "queue size", Of: "agent",
	Suspects: `SELECT a.agent_id FROM agent_queues a WHERE a.queue_size <>
		(SELECT count(*) FROM agent_queue_items i WHERE i.agent_id = a.agent_id AND i.status = 'queued')`,
	Stored: `SELECT queue_size FROM agent_queues WHERE agent_id = $1 FOR UPDATE`,
	Count:  `SELECT count(*) FROM agent_queue_items WHERE agent_id = $1 AND status = 'queued'`,
	Set:    `UPDATE agent_queues SET queue_size = $2, updated_at = now() WHERE agent_id = $1`}
