// Package wire is dubflow's message contract in Go: the task envelope, the
// payload of every step, dead letters, TTS compensation messages and
// integrator events, with the routing keys they travel under.
//
// Decode turns a delivery body into an *Envelope after checking it against
// the JSON Schemas embedded from the proto module (the envelope, then the
// payload schema named after its step) and against the rules a schema cannot
// express: object keys under the task's own prefix and a payload task_id
// equal to the envelope's. Every rejection is an *InvalidError whose message
// names the field, e.g. "payload.source_video_key: must not contain '..'";
// the step runtime treats it as permanent.
//
// New, Next and Retry build envelopes that pass the same checks, so a
// producer never publishes what a consumer would refuse.
//
// # Delivery: at-least-once; deduplicate by event_id
//
// Every message is delivered at least once: the outbox publishes again a
// message whose publisher confirm was lost in a crash, and the broker
// redelivers a message whose consumer died before its ack. So every message
// carries a stable id, the same on each delivery: an event its event_id
// (Event.EventID), a task message its message_id (Envelope.MessageID), and
// each of them the same id as its AMQP message_id property. Integrators
// deduplicate events by event_id. The steps themselves need no id: the step
// runtime runs each (task, step, part, attempt) once through its step
// attempts.
// Messages of older producers may carry no id in the body; their AMQP
// message_id, when set, is the one to use.
package wire
