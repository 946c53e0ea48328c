// Package store is dubflow's Postgres layer (pgx/v5): the connection pool,
// the migrations, and the step runtime's queries on task_steps and
// step_parts (claims, leases, fan-in). The tasks table belongs to pkg/task,
// the outbox to pkg/outbox.
package store
