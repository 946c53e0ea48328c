// Package store is dubflow's Postgres layer (pgx/v5): the connection pool,
// the migrations, and the queries on tasks, task_steps, segments, the outbox
// and dead letters.
package store
