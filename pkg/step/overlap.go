package step

import (
	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/wire"
)

// This file is the overlap of fanned-out steps (issue 14): a part of the
// next step is emitted for each part of this one as soon as that part and
// the steps it also needs have succeeded, instead of one message for the
// whole step once every part has. Translate batches each emit their tts
// part once asr is complete; the asr part that completes asr emits the tts
// parts of the batches that finished before it. Both go through the same
// lock of the next step (emit_when_steps_done, emit_when_part_done), so
// that whichever commits last emits the part, exactly once.

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
	_, part, body, err := m.nextPart(step, payload)
	if err != nil {
		return err
	}
	o := outbox.New(wire.Exchange, wire.RoutingKey(step), body)
	m.stmts = append(m.stmts, stmt{
		sql:    emitWhenStepsDoneSQL,
		args:   []any{m.Envelope.TaskID, after, step, part, o.MessageID, o.Exchange, o.RoutingKey, o.Body},
		outbox: o,
	})
	return nil
}

// EmitWhenPartDone stages a part of the next step that is emitted, in this
// message's success transaction, if part of step (of the same task) has
// succeeded by then and the next part was not emitted before: the other
// half of EmitWhenOthersDone.
func (m *Message) EmitWhenPartDone(step string, payload any, afterStep, afterPart string) error {
	_, part, body, err := m.nextPart(step, payload)
	if err != nil {
		return err
	}
	o := outbox.New(wire.Exchange, wire.RoutingKey(step), body)
	m.stmts = append(m.stmts, stmt{
		sql:    emitWhenPartDoneSQL,
		args:   []any{m.Envelope.TaskID, afterStep, afterPart, step, part, o.MessageID, o.Exchange, o.RoutingKey, o.Body},
		outbox: o,
	})
	return nil
}
