-- +goose Up
-- A released entry reads 'released' (issue 47): the conversation it was
-- assigned to has ended and the agent's unit is back. Before, it kept
-- reading 'assigned' with released_at set, and confirming it answered
-- "(assigned): entry is not assigned". A released entry keeps the agent it
-- was assigned to (assigned_staff_id: who served the visitor); released_at
-- is set exactly when the status is 'released'.
ALTER TABLE visitor_waiting_queue
    DROP CONSTRAINT visitor_waiting_queue_status_check,
    DROP CONSTRAINT visitor_waiting_queue_check;

UPDATE visitor_waiting_queue SET status = 'released'
WHERE status = 'assigned' AND released_at IS NOT NULL;
-- Entries put back in the queue by an expired reservation never kept a
-- released_at, but make sure.
UPDATE visitor_waiting_queue SET released_at = NULL
WHERE status <> 'released' AND released_at IS NOT NULL;

ALTER TABLE visitor_waiting_queue
    ADD CONSTRAINT visitor_waiting_queue_status_check
        CHECK (status IN ('waiting', 'assigned', 'released', 'cancelled', 'expired')),
    ADD CONSTRAINT visitor_waiting_queue_staff_check
        CHECK ((status IN ('assigned', 'released')) = (assigned_staff_id IS NOT NULL)),
    ADD CONSTRAINT visitor_waiting_queue_released_check
        CHECK ((status = 'released') = (released_at IS NOT NULL));

-- +goose Down
ALTER TABLE visitor_waiting_queue
    DROP CONSTRAINT visitor_waiting_queue_released_check,
    DROP CONSTRAINT visitor_waiting_queue_staff_check,
    DROP CONSTRAINT visitor_waiting_queue_status_check;
UPDATE visitor_waiting_queue SET status = 'assigned' WHERE status = 'released';
ALTER TABLE visitor_waiting_queue
    ADD CONSTRAINT visitor_waiting_queue_status_check
        CHECK (status IN ('waiting', 'assigned', 'cancelled', 'expired')),
    ADD CONSTRAINT visitor_waiting_queue_check
        CHECK ((status = 'assigned') = (assigned_staff_id IS NOT NULL));
