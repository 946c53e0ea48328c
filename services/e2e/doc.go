// Package e2e holds dubflow's end-to-end tests and pipeline benchmarks. It
// has no code of its own: the tests build the real binaries (the five
// workers, the DLQ recorder and dubctl) with `go build`, run them as
// processes against a fresh database, RabbitMQ virtual host and bucket, and
// check what comes out of the whole chain.
package e2e
