package step

// This file is the overlap of fanned-out steps: a part of the
// next step is emitted for each part of this one as soon as that part and
// the steps it also needs have succeeded, instead of one message for the
// whole step once every part has: a part waiting for its own input and
// for whole steps besides (EmitWhenOthersDone) is emitted by whichever of
// its input part and the part that completes those steps commits last
// (EmitWhenPartDone). Both go through the same lock of the next step
// (emit_when_steps_done, emit_when_part_done), so that the part is emitted
// exactly once. (Translate batches emitted their tts parts this way, once
// asr was complete; they now emit them at once, and the asr merge's
// EmitWhenPartDone only serves batches that finished under that rule.)

// emitWhenPartDoneSQL emits a part of the next step once a given part of
// another step has succeeded (arguments: task, step, part, next step, next
// part, message id, exchange, routing key, body).
const emitWhenPartDoneSQL = `SELECT emit_when_part_done($1, $2, $3, $4, $5, $6, $7, $8, $9)`

// EmitWhenOthersDone stages a part of the next step that is emitted when
// every step of after has succeeded — this message's own part succeeds in
// the same transaction — unless it was emitted before. The part whose
// success completes those steps must stage EmitWhenPartDone for this
// message's part, so that one of the two emits it, exactly once.
func (m *Message) EmitWhenOthersDone(step string, payload any, after ...string) error {
	return m.emitWhen(emitWhenStepsDoneSQL, step, payload, after)
}

// EmitWhenPartDone stages a part of the next step that is emitted, in this
// message's success transaction, if part of step (of the same task) has
// succeeded by then and the next part was not emitted before: the other
// half of EmitWhenOthersDone.
func (m *Message) EmitWhenPartDone(step string, payload any, afterStep, afterPart string) error {
	return m.emitWhen(emitWhenPartDoneSQL, step, payload, afterStep, afterPart)
}
