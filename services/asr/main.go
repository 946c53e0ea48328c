// Command asr is the speech-recognition step of the dubbing chain: it
// transcribes the extracted audio with timestamps, stores the transcript,
// writes the task's segments and fans them out to translate in batches.
package main

import "github.com/dubflow/dubflow/pkg/worker"

const service = "asr"

// main serves the step; run (config.go) builds its handler from the
// configuration.
func main() { worker.Main(service, run) }
