// Package run is one chaos run (Main): it sets up the private stack and
// the services, injects the faults while it submits the tasks, waits for
// them to end and judges, with its exit code.
package run
