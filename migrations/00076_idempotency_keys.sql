-- +goose Up
-- idempotency_keys: the Idempotency-Key of a task submission (issue 47):
-- POST /api/tasks with the header, dubctl submit --idempotency-key in
-- either mode. One row per principal (the console's token name, or
-- dubctl's "cli:<user>") and key: the request's fingerprint, the task it
-- created (or is creating) and, once created, the answer (status 201 and
-- its body, byte for byte). A second request with the same key and fingerprint within
-- 24 hours (expires_at) gets that answer again and creates nothing; one
-- while the first is in flight (status NULL) waits for it; one with another
-- fingerprint is refused. A refused request's row is deleted at once, so
-- it is judged afresh. The console deletes expired rows
-- (pkg/idempotency.Sweep); a key whose row expired starts afresh.
CREATE TABLE idempotency_keys (
    principal   text        NOT NULL,
    key         text        NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
    fingerprint bytea       NOT NULL,
    task_id     uuid,
    status      integer,
    body        bytea,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    PRIMARY KEY (principal, key)
);
CREATE INDEX idempotency_keys_expires ON idempotency_keys (expires_at);

-- +goose Down
DROP TABLE idempotency_keys;
