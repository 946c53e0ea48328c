// Package layers holds the checks of the house's shape, run with the
// tests (and by make lint): the import graph of dubflow's own packages is
// at most MaxDepth packages deep, and the step runtime and what the
// workers use never stand on the read model (pkg/view) or the admission
// rules (pkg/admit), nothing under pkg/ reads the environment, and each
// table with an owner (segments, tasks, task_glossaries, task_steps,
// step_parts, dead_letters, tts_compensations, outbox, task_streams,
// stream_batches) is written by that
// package alone. It
// has no code of its own.
package layers

// MaxDepth is the longest chain of imports, in packages, the project's
// graph may have: a service, the workers' wiring, the runtime, the tables'
// owners, the store and the contracts.
const MaxDepth = 7
