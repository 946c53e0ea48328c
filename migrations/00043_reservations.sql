-- +goose Up
-- Reservations (seed 003) on the waiting queue's assignments. An assignment
-- reserves one unit of the agent's capacity until reserved_until; the agent
-- confirms it (confirmed_at) or the reservation expires: any replica's sweep
-- (and the start-up recovery) puts the entry back in the queue at its place
-- (arrival_seq is kept) and gives the unit back, in one transaction. With
-- QUEUE_RESERVATION_TIMEOUT_SECONDS=0 assignments are confirmed at once.
-- released_at marks the end of an assigned conversation: a release sets it
-- once and lowers the agent's load once, so releasing twice is releasing once.
-- Invariant: staff.current_load = the agent's assigned entries with
-- released_at NULL.
ALTER TABLE visitor_waiting_queue
    ADD COLUMN reserved_until timestamptz,
    ADD COLUMN confirmed_at   timestamptz,
    ADD COLUMN released_at    timestamptz;

-- Assignments made before this migration were final: confirmed. Loads were
-- lowered by releases that named no entry; mark the oldest assignments of
-- each agent released so that the invariant holds from here on.
UPDATE visitor_waiting_queue SET confirmed_at = assigned_at WHERE status = 'assigned';
UPDATE visitor_waiting_queue e SET released_at = now()
FROM (
    SELECT w.id, row_number() OVER (PARTITION BY w.assigned_staff_id ORDER BY w.assigned_at DESC, w.id) AS newest,
           s.current_load
    FROM visitor_waiting_queue w JOIN staff s ON s.id = w.assigned_staff_id
    WHERE w.status = 'assigned'
) r
WHERE e.id = r.id AND r.newest > r.current_load;

-- Open reservations by expiry (the sweep) and an agent's open assignments
-- (releases, load recomputation).
CREATE INDEX visitor_waiting_queue_reservations
    ON visitor_waiting_queue (reserved_until)
    WHERE status = 'assigned' AND confirmed_at IS NULL AND released_at IS NULL;
CREATE INDEX visitor_waiting_queue_open_assignments
    ON visitor_waiting_queue (assigned_staff_id, assigned_at)
    WHERE status = 'assigned' AND released_at IS NULL;

-- +goose Down
DROP INDEX visitor_waiting_queue_open_assignments;
DROP INDEX visitor_waiting_queue_reservations;
ALTER TABLE visitor_waiting_queue
    DROP COLUMN released_at,
    DROP COLUMN confirmed_at,
    DROP COLUMN reserved_until;
