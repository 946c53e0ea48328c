-- +goose Up
-- Engine leases (issue 30, pkg/pool lease.go): a replica holds one row of
-- engine_reservations per engine it serves calls on (owner: the replica),
-- standing for the concurrency slots it holds (slots, counted in the
-- engine's in_flight) and the quota units it leased for calls to come
-- (units, counted in the engine's used, as of the replica's last batch).
-- The replica serves calls from its lease without a round trip, gives back
-- what it did not use at its next batch, and the row expires (its slots
-- reaped, its units not refunded: they may have been spent) if it dies.
-- The per-call rows of before have owner '' and one slot.
ALTER TABLE engine_reservations
    ADD COLUMN owner text    NOT NULL DEFAULT '',
    ADD COLUMN slots integer NOT NULL DEFAULT 1;
CREATE UNIQUE INDEX engine_reservations_lease ON engine_reservations (step, name, owner) WHERE owner <> '';

-- +goose Down
DROP INDEX engine_reservations_lease;
ALTER TABLE engine_reservations DROP COLUMN slots, DROP COLUMN owner;
