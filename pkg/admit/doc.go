// Package admit is the one admission path of dubflow: every door that
// starts a task — the console's POST /api/tasks (multipart and presigned),
// dubctl submit (with a database or through the console) and extract_audio
// for a message an outside publisher sent — checks it here, so that the
// same input is refused with the same text everywhere, before anything is
// created or uploaded.
//
// Decide, then do. The checks are pure functions of the request, the rules
// and the capabilities:
//
//   - Check: the languages (a code each; the source never a target; at most
//     MaxTargets targets, each once; each possible with the configured
//     engines), the speaker (the wire contract's voice name) and the
//     glossary (CSV "source,target" parsed by glossary.ParseCSV, at most
//     MaxGlossaryTerms terms of MaxTermLength characters; a byte-order mark
//     skipped; bytes that are not UTF-8, a source term given twice and the
//     characters the text rule refuses — control characters, bidirectional
//     overrides and isolates, textrule.Check — refused with their line). It
//     returns the admitted Task, whose Payload is the extract_audio payload
//     to submit.
//   - Glossary: the glossary rules for terms that arrived parsed (an
//     outside publisher's payload; extract_audio).
//   - Languages: the language part of Check alone (extract_audio).
//   - Limits.Media: the video in a local file (at most MAX_VIDEO_BYTES,
//     readable by ffprobe, an audio and a video stream, at most
//     MAX_VIDEO_SECONDS); Limits.Size for a door that counts bytes while it
//     receives them; Limits.File for a door told not to run ffprobe
//     (dubctl submit --no-validate): the size and a known container's
//     signature (Container), so that garbage is refused there too.
//
// Loading is separate: LoadCapabilities reads what the workers announced
// (engine.Announce; pkg/worker renews it every engine.RefreshInterval): asr the languages
// it hears, translate its pairs, tts the languages it speaks. A step that
// never announced is not judged — its workers may be scaled to zero or not
// deployed yet, and a door does not refuse what it cannot know; the
// worker's own check still refuses the task then, later.
//
// A refusal is an *Error: Field, Reason and a Kind that the door maps —
// Invalid to HTTP 400 and dubctl's exit 2, TooLarge to 413 and exit 2,
// Unavailable (the probe could not run) to 503 and exit 1. Its Error()
// text is what every door shows.
//
// A door checks in this order: Check (cheap, before any upload), then
// Limits.Media, then it creates the task.
package admit
