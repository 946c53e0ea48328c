-- +goose Up
-- Console sessions are signed cookies that every replica verifies alone;
-- logging out revokes one server-side (issue 28, item 7): the SHA-256 of
-- the cookie value is kept here until the cookie would have expired, and
-- a cookie whose digest is here is refused by every replica. Rows past
-- their expiry are deleted at the next logout.
CREATE TABLE console_revoked_sessions (
    digest     bytea PRIMARY KEY,
    expires_at timestamptz NOT NULL
);
CREATE INDEX console_revoked_sessions_expiry ON console_revoked_sessions (expires_at);

-- +goose Down
DROP TABLE console_revoked_sessions;
