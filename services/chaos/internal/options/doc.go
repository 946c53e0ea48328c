// Package options reads the chaos run's flags (Parse) and checks and
// completes them (Resolve): the tasks, the seed, the durations, -cluster,
// -ha and the binaries.
package options
