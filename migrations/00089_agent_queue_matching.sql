-- +goose Up
-- Seed 002 wired to matching (issue 48). A visitor's request that names an
-- agent (transfer_to_human with a staff_id) whose capacity is used up waits
-- in that agent's queue: the entry's status is 'queued' (the periodic scan,
-- positions and the project's matching read only 'waiting' entries, so
-- none of them touches it) and an agent_queue_items row with entry_id
-- holds its place. When one of the agent's conversations ends, the release
-- consumes the agent's oldest queued entry and assigns it in the same
-- transaction.
--
-- requested_staff_id: the agent the visitor asked for (kept whatever
-- happened next: who was asked, beside assigned_staff_id, who served).
ALTER TABLE visitor_waiting_queue
    ADD COLUMN requested_staff_id uuid REFERENCES staff (id),
    DROP CONSTRAINT visitor_waiting_queue_status_check,
    ADD CONSTRAINT visitor_waiting_queue_status_check
        CHECK (status IN ('waiting', 'queued', 'assigned', 'released', 'cancelled', 'expired')),
    ADD CONSTRAINT visitor_waiting_queue_queued_check
        CHECK (status <> 'queued' OR requested_staff_id IS NOT NULL);

-- A visitor is active in a project once: waiting in its queue or queued
-- for one of its agents, not both.
DROP INDEX visitor_waiting_queue_active_visitor;
CREATE UNIQUE INDEX visitor_waiting_queue_active_visitor
    ON visitor_waiting_queue (project_id, visitor_id) WHERE status IN ('waiting', 'queued');

-- user_id: who queued the item (seed 002's order creator, "A"); only they
-- may cancel it. NULL for items queued before this migration (anyone
-- naming themselves may cancel those, as before).
-- entry_id: the waiting entry the item stands for (NULL for an outside
-- order, posted to POST /queue/agents/{agentId}/orders and handed out by
-- consume-next); such an item is paired by the dispatcher, never handed out.
ALTER TABLE agent_queue_items
    ADD COLUMN user_id text CHECK (char_length(user_id) BETWEEN 1 AND 255),
    ADD COLUMN entry_id uuid REFERENCES visitor_waiting_queue (id),
    ADD CONSTRAINT agent_queue_items_entry_check CHECK (entry_id IS NULL OR entry_id = order_id);
-- An agent's queued entries in arrival order: the pairing's claim, and the
-- project's matching asking whether an agent serves its own queue first.
CREATE INDEX agent_queue_items_agent_entries
    ON agent_queue_items (agent_id, seq) WHERE status = 'queued' AND entry_id IS NOT NULL;
-- An agent's queued outside orders in arrival order: consume-next.
CREATE INDEX agent_queue_items_agent_orders
    ON agent_queue_items (agent_id, seq) WHERE status = 'queued' AND entry_id IS NULL;
CREATE INDEX agent_queue_items_entry ON agent_queue_items (entry_id) WHERE entry_id IS NOT NULL;

-- +goose Down
DROP INDEX agent_queue_items_entry;
DROP INDEX agent_queue_items_agent_orders;
DROP INDEX agent_queue_items_agent_entries;
-- Queued entries go back to their project's queue; their items are
-- cancelled.
UPDATE agent_queue_items SET status = 'cancelled', cancelled_at = now(), cancelled_by = 'migration 00089 down',
    updated_at = now()
WHERE status = 'queued' AND entry_id IS NOT NULL;
UPDATE agent_queues a SET queue_size =
    (SELECT count(*) FROM agent_queue_items i WHERE i.agent_id = a.agent_id AND i.status = 'queued');
UPDATE visitor_waiting_queue SET status = 'waiting' WHERE status = 'queued';
ALTER TABLE agent_queue_items
    DROP CONSTRAINT agent_queue_items_entry_check,
    DROP COLUMN entry_id,
    DROP COLUMN user_id;
DROP INDEX visitor_waiting_queue_active_visitor;
CREATE UNIQUE INDEX visitor_waiting_queue_active_visitor
    ON visitor_waiting_queue (project_id, visitor_id) WHERE status = 'waiting';
ALTER TABLE visitor_waiting_queue
    DROP CONSTRAINT visitor_waiting_queue_queued_check,
    DROP CONSTRAINT visitor_waiting_queue_status_check,
    ADD CONSTRAINT visitor_waiting_queue_status_check
        CHECK (status IN ('waiting', 'assigned', 'released', 'cancelled', 'expired')),
    DROP COLUMN requested_staff_id;
