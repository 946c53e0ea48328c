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
package wire
