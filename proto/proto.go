// Package proto holds dubflow's wire contracts: the JSON Schema of the task
// envelope, of every step's payload, of the dead-letter envelope and of the
// TTS compensation message, with example messages taken from the seed
// specification. The schemas are embedded so that the runtime validates
// messages against exactly the files in this folder.
package proto

import "embed"

// Schemas holds every *.schema.json file of this folder.
//
//go:embed *.schema.json
var Schemas embed.FS

// Examples holds the example messages under examples/, used as test vectors.
//
//go:embed examples/*.json
var Examples embed.FS
