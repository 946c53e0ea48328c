// Package proto holds dubflow's wire contracts: the JSON Schema (draft
// 2020-12) of the task envelope, of every step's payload, of the dead-letter
// envelope, of the TTS compensation message and of integrator events, with
// an example message of each. The schemas are
// embedded so that the runtime (pkg/wire) validates messages against exactly
// the files in this folder; README.md documents each message.
package proto

import "embed"

// Schemas holds every *.schema.json file of this folder.
//
//go:embed *.schema.json
var Schemas embed.FS

// Examples holds the example messages under examples/, used as test vectors.
// Files named invalid_*.json must be rejected, for the reason given in their
// x_invalid_reason field.
//
//go:embed examples/*.json
var Examples embed.FS
