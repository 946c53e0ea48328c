// Package task owns the lifecycle of a dubbing task: every change of a row
// of the tasks table is one of its transitions, and no other package writes
// that table.
//
//	transition  moves                              keeps                  event
//	Create      (no row) → queued                  an existing row        task.queued
//	Start       queued → running                   compensating, done,    task.started
//	                                               failed, cancelled
//	Compensate  running → compensating                                    task.compensating
//	Resume      compensating → running                                    task.resumed
//	Succeed     running → done                                            task.succeeded
//	Fail        queued, running, compensating,     done, cancelled; a     task.failed
//	            review → failed                    part that succeeded
//	                                               since
//	FailNoSpeech queued, running → failed: "asr: no speech   task.failed
//	            found in the audio" (Fail's rules)
//	Cancel      queued, running, compensating,                            task.cancelled
//	            review → cancelled
//	Retry       failed, cancelled, queued          running, compensating  task.retried
//	            → running
//	Redub       done → running                                            task.redubbing
//	Hold        queued, running → review: the      compensating, done,    task.review
//	            lines wait for a person (after     failed, cancelled
//	            asr, or after the last translate
//	            batch: its guard)
//	Approve     review → running                                          task.approved
//	ChangeSpeaker failed, cancelled, compensating: the speaker changes, the
//	            status is kept (a retry with another voice)
//	Spawn       (no row) → queued: a child     an existing child      task.queued
//	            of a task with several
//	            languages (languages.go;
//	            the asr worker spawns)
//
// The state machine, and the way out of every status (Ways, which the
// docs/operations.md shows as a table):
//
//	queued        → running (extract_audio's success); an operator's Cancel;
//	                failed by the reconciler after RECONCILE_TASK_MAX_IDLE_SECONDS
//	running       → done, compensating, failed (its steps); Cancel; failed by
//	                the reconciler after RECONCILE_TASK_MAX_IDLE_SECONDS
//	                without progress and no step running
//	compensating  → running (tts_requeue, a retry with another speaker:
//	                Resume); Cancel; failed by tts once TTS_MAX_REQUEUES
//	                requeues still fail, or by the reconciler after
//	                RECONCILE_COMPENSATING_MAX_SECONDS
//	review        → running (a person's approval: Approve); Cancel. No bound:
//	                it waits for a person, nothing runs and nothing is owed,
//	                so it is never stuck and never alerted
//	done          → running (Redub)
//	failed        → running (Retry: a retry, a dead letter's replay)
//	cancelled     → running (Retry)
//
// A task that was cancelled or failed also stops its work: no step of it is
// claimed any more, and a running one is interrupted (Watcher; the
// migrations' task_stopped, which a parent an operator cancelled extends to
// its children).
//
// A task ends done, failed or cancelled (Ended). Succeed, Fail and Cancel
// of a child task also conclude its parent when the child is the last of
// its siblings to end, in the same statement: done if all are done, failed
// if one failed, cancelled if none failed but one was cancelled (the error
// names each language that failed or was cancelled). Cancel of a parent
// cancels its unfinished children too, and no child's end concludes a
// parent an operator cancelled.
//
// A transition applied to the status it leads to refreshes the row without
// an event (Start or Resume of a running task, Compensate of a compensating
// one, Fail of a failed one, which keeps its first error). Touch and Settle
// change no status: Touch moves updated_at of an unfinished task, Settle
// records the languages, speaker and keys the first step settled. Every
// status a transition neither moves nor keeps is refused.
//
// A Transition is a value: one SQL statement with its arguments and the
// event.* message it announces. The statement locks the row, checks the
// status it leaves, writes the row and adds the event to the outbox, all or
// nothing. A status the transition may not leave is refused: the statement
// fails (the table's status CHECK constraint rejects the row it would write),
// so the transaction it runs in rolls back and the caller gets a
// *RefusedError (MapError turns the Postgres error into one). A status it
// tolerates without change (Fail of a task already done, Start of a task
// that is compensating) is kept: nothing is written and nothing announced.
//
// The same value runs in a plain transaction (Apply: dubctl, the
// reconciler, the dead-letter recorder, tts_requeue) and inside a step's
// success commit (the step runtime stages SQL and Args with the step's other
// statements and publishes Event after the commit).
package task
