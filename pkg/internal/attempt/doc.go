// Package attempt owns the step attempts: every write of a task_steps,
// step_parts or step_handbacks row is one of its named transitions, and no
// other package writes those tables (pkg/task's Spawn, which copies a parent's history
// into a child task in one statement, writes it through InheritCTE).
//
//	transition    moves                                 who
//	Claim         (no row) or an expired lease →        the step runtime, per delivery
//	              running, held by the worker; nothing
//	              when the task's work stopped (Ended)
//	Extend        running → running, lease pushed       the runtime's heartbeat
//	Release       running → running, lease ended now    the runtime, handing a message back
//	HandBack      a hand-back of an attempt's message   the runtime, handing a message back
//	              counted in step_handbacks             or checking it again later
//	Succeed       running → succeeded                   the runtime (Finish of Succeeded)
//	Park          running → parked                      the runtime (Finish of Parked)
//	Retry         running → failed; a delay tier        the runtime (Finish of Retried)
//	              carries the next attempt
//	DeadLetter    running → failed; the DLQ carries     the runtime (Finish of DeadLettered)
//	              the message
//	Refuse        running → failed; the task refused    the runtime (Finish of Refused)
//	              the step's outcome, or stopped (was
//	              cancelled or failed) while it ran
//	AddPart       (no part) → a part of a step, with    the runtime's Emit, pkg/dub's redub
//	              the message emitted for it
//	AddNewPart    AddPart, and the message to the       the runtime's EmitFor
//	              outbox only when the part is new
//	EmitWhenDone  the next step's part, once, when      the runtime's fan-in
//	              every part of a step succeeded
//	Cover         parts not succeeded → succeeded,      the tts worker's whole-task run
//	              covered by a run of the whole step    (step.Message.CoverParts)
//	CloseEnded    running, lease expired, task ended    the reconciler
//	              → failed                              (step.CloseEndedAttempts)
//	CloseExpired  running, lease expired → failed       the reconciler, before a re-drive
//	                                                    (step.CloseExpiredAttempt)
//	InheritCTE    (no row) → succeeded, the parent's    pkg/task's Spawn of a child task
//	              extract_audio and asr as a child's
//	RecordSucceeded (no row) → succeeded, each step     pkg/task/tasktest's finished task
//	              of a task made finished at once
//	ReleaseStuck  held parts → let into their window    the reconciler
//	              (release_held), past an age           (step.ReleaseStuckWindows) and
//	                                                    the start-up recovery
//
// The runtime's decision (pkg/step's decide) names an Outcome; Finish turns
// it into the statement that ends the claimed attempt. The statements that
// end an attempt check that the caller still holds it (finish_step in the
// migrations): a worker whose lease ran out gets ErrLeaseLost, one whose
// claim row is gone ErrClaimLost (MapError).
//
// The package sits under pkg/internal so that no service — no handler —
// can import it: claims, leases and outcomes are pkg/step's Runner's alone.
// Services reach the transitions meant for them through pkg/step: a
// handler stages Cover with Message.CoverParts, the reconciler closes
// attempts with CloseEndedAttempts and CloseExpiredAttempt and reads the
// pending parts; pkg/dub's redub adds a version's part with AddPart.
// pkg/recovery, the start-up pass below the runtime, calls CloseEnded,
// CountExpired and ReleaseStuck itself.
//
// A Statement is a value: SQL and its arguments, to run alone (Exec) or
// staged with a step's other statements in its success transaction. The
// passes that run on a clock (CloseEnded, CloseExpired and the reads of
// pending parts) take the time as an argument: nil is the database's own
// clock, a time moves it (tests, like river's rescuer).
package attempt
