-- +goose Up
-- staff: the human support agents the waiting queue assigns visitors to.
-- current_load counts the conversations an agent holds; the dispatcher raises
-- it only with a conditional update (current_load < max_concurrent) in the
-- same transaction that assigns the entry, so no agent is ever pushed over
-- its capacity, whatever the number of dispatcher replicas.
CREATE TABLE staff (
    id                uuid PRIMARY KEY,
    project_id        uuid NOT NULL,
    availability      text NOT NULL DEFAULT 'offline'
                      CHECK (availability IN ('online', 'away', 'offline')),
    max_concurrent    integer NOT NULL DEFAULT 1 CHECK (max_concurrent >= 0),
    current_load      integer NOT NULL DEFAULT 0 CHECK (current_load >= 0),
    -- idle_since: when the agent last took or ended a conversation (or came
    -- online); ties on free capacity go to the agent idle longest.
    idle_since        timestamptz NOT NULL DEFAULT now(),
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX staff_project_online_idx ON staff (project_id) WHERE availability = 'online';

-- visitor_waiting_queue: the seed's VisitorWaitingQueue. The seed's stored
-- "position" (count()+1 at insert) is replaced by arrival_seq, a sequence
-- number taken at arrival; an entry's position is its live rank among its
-- project's waiting entries in service order (priority desc, arrival_seq),
-- computed when read.
CREATE TABLE visitor_waiting_queue (
    id                 uuid PRIMARY KEY,
    project_id         uuid NOT NULL,
    visitor_id         uuid NOT NULL,
    session_id         text NOT NULL DEFAULT '',
    assigned_staff_id  uuid REFERENCES staff (id),
    source             text NOT NULL
                       CHECK (source IN ('ai_request', 'visitor', 'transfer', 'system', 'no_staff')),
    urgency            text NOT NULL DEFAULT 'normal'
                       CHECK (urgency IN ('low', 'normal', 'high', 'urgent')),
    arrival_seq        bigint GENERATED ALWAYS AS IDENTITY,
    priority           integer NOT NULL CHECK (priority BETWEEN 0 AND 3),
    status             text NOT NULL DEFAULT 'waiting'
                       CHECK (status IN ('waiting', 'assigned', 'cancelled', 'expired')),
    visitor_message    text NOT NULL DEFAULT '',
    reason             varchar(255) NOT NULL DEFAULT '',
    channel_id         varchar(255) NOT NULL DEFAULT '',
    channel_type       integer,
    extra_metadata     jsonb NOT NULL DEFAULT '{}'::jsonb,
    retry_count        integer NOT NULL DEFAULT 0 CHECK (retry_count >= 0),
    last_attempt_at    timestamptz,
    entered_at         timestamptz NOT NULL DEFAULT now(),
    assigned_at        timestamptz,
    exited_at          timestamptz,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    CHECK ((status = 'assigned') = (assigned_staff_id IS NOT NULL))
);
-- One active (waiting) entry per visitor and project: a duplicate enqueue is
-- refused by this index, not by a check-then-insert.
CREATE UNIQUE INDEX visitor_waiting_queue_active_visitor
    ON visitor_waiting_queue (project_id, visitor_id) WHERE status = 'waiting';
-- Service order within a project: the head of the queue, live positions, and
-- the scan's per-project batches all read this index.
CREATE INDEX visitor_waiting_queue_service_order
    ON visitor_waiting_queue (project_id, priority DESC, arrival_seq) WHERE status = 'waiting';
CREATE INDEX visitor_waiting_queue_staff_idx
    ON visitor_waiting_queue (assigned_staff_id) WHERE status = 'assigned';

-- +goose Down
DROP TABLE visitor_waiting_queue;
DROP TABLE staff;
