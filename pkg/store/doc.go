// Package store is dubflow's Postgres layer (pgx/v5): the connection pool,
// the migrations, how an outage of the database is told from a failed
// statement, and the counts of the outbox. The step attempts and parts
// belong to pkg/attempt, the tasks table to pkg/task, the outbox's rows to
// pkg/outbox.
package store
