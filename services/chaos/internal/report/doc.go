// Package report is the chaos run's verdict: the Summary of a run, the
// findings that fail it, the pauses that faults cost and the heal checks
// of -ha, printed for a reader with seed 003's figures.
package report
