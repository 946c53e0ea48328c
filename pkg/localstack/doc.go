// Package localstack starts private instances of the servers the local
// stack runs — RabbitMQ nodes and clusters of them, each on its own ports
// and data — and hands out free loopback ports, for programs that drive
// them (the chaos run) and, through pkg/testenv's testing.TB wrappers,
// for tests. Nothing here reports through testing: every function returns
// its error, and what a caller starts it stops (Close).
package localstack
