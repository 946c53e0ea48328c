-- +goose Up
-- The console lists tasks newest first with keyset paging on (created_at,
-- id), of every status or of one.
CREATE INDEX tasks_created_idx ON tasks (created_at DESC, id DESC);
CREATE INDEX tasks_status_created_idx ON tasks (status, created_at DESC, id DESC);

-- +goose Down
DROP INDEX tasks_status_created_idx;
DROP INDEX tasks_created_idx;
