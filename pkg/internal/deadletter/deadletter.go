// Package deadletter is the one writer of dead_letters: the dead-letter
// recorder's and the outbox relay's records (Insert), the replays' marks
// (MarkReplayed) and the purges (Purge). pkg/dlq is the door services use
// (dlq.Record, dlq.Replay, dlq.BulkPurge); pkg/view reads the table for the
// read model. Nothing here knows the wire contract: callers say what to
// record, and the table's rules (one row per message id, an original that
// jsonb refuses kept as raw bytes only) live here, once.
package deadletter

import "errors"

// ErrNotFound is returned for a dead letter id without a row.
var ErrNotFound = errors.New("dead letter not found")
