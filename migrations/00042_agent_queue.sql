-- +goose Up
-- The per-agent queue (seed 002): orders waiting for one busy agent, served
-- oldest first. agent_queues holds one row per agent with queue_size, the
-- number of its queued items; every path that changes an item's status
-- changes queue_size in the same transaction, and an enqueue raises it only
-- with a conditional update (queue_size < QUEUE_MAX_N) on this row, so
-- concurrent enqueues never exceed the capacity.
CREATE TABLE agent_queues (
    agent_id    uuid PRIMARY KEY,
    queue_size  integer NOT NULL DEFAULT 0 CHECK (queue_size >= 0),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- agent_queue_items: one order queued for an agent. seq (an identity taken at
-- insert) is the arrival order; positions are derived from it when read.
CREATE TABLE agent_queue_items (
    id            uuid PRIMARY KEY,
    agent_id      uuid NOT NULL REFERENCES agent_queues (agent_id),
    order_id      uuid NOT NULL,
    task_id       uuid NOT NULL,
    seq           bigint GENERATED ALWAYS AS IDENTITY,
    status        text NOT NULL DEFAULT 'queued'
                  CHECK (status IN ('queued', 'consumed', 'cancelled')),
    cancelled_by  text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    consumed_at   timestamptz,
    cancelled_at  timestamptz,
    updated_at    timestamptz NOT NULL DEFAULT now()
);
-- One queued item per (agent, order): a duplicate enqueue is refused by this
-- index, not by a check-then-insert.
CREATE UNIQUE INDEX agent_queue_items_queued_order
    ON agent_queue_items (agent_id, order_id) WHERE status = 'queued';
-- The agent's queue in arrival order: consume-next, status and positions.
CREATE INDEX agent_queue_items_agent_seq
    ON agent_queue_items (agent_id, seq) WHERE status = 'queued';
-- Position lookups by order.
CREATE INDEX agent_queue_items_order ON agent_queue_items (order_id) WHERE status = 'queued';

-- +goose Down
DROP TABLE agent_queue_items;
DROP TABLE agent_queues;
