// Package database is dubctl's database mode: with the workers'
// credentials it reads Postgres through the read model (pkg/view) and
// writes through the packages the console's routes call (pkg/task, pkg/dub,
// pkg/dlq, pkg/compensation, pkg/tenant, pkg/setting), each action with
// the audit row the console writes for it (audit.go). The connections are
// opened on first use (clients.go). The actions whose packages stand too
// deep in the import graph for a room (a retry, a pause, the workers) are
// main's, through Pool, Publisher, Commit and Record.
package database
