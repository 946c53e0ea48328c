// Package localstack starts private instances of the servers the local
// stack runs, each on its own ports and data, for programs that drive
// them (the chaos run) and, through pkg/testenv's testing.TB wrappers,
// for tests: RabbitMQ nodes and clusters of them (NetCluster: each node in
// a network namespace of its own, to be partitioned away), a PostgreSQL
// cluster that Patroni fails over (PGCluster), a distributed MinIO of
// several processes (MinioSet), a TCP forwarder that can be cut
// (Forwarder), and free loopback ports. Nothing here reports through
// testing: every function returns its error, and what a caller starts it
// stops (Close).
package localstack
