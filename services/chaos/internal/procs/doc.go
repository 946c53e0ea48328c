// Package procs runs the real services of the chaos run as processes: each
// under a supervisor that starts it again after a kill, or a second after
// it exited by itself, with its environment (Environ) and its /readyz.
package procs
