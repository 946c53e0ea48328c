// Command tts is the speech-synthesis step of the dubbing chain: it speaks
// every translated segment, fitted to its slot, stores each clip as soon as
// it exists, and hands the task to mux_video — or, when a segment still
// fails after its retries, sends it to the compensation queue and parks the
// task for an operator.
package main

import "github.com/dubflow/dubflow/pkg/worker"

const service = "tts"

// main serves the step; run (config.go) builds its handler from the
// configuration.
func main() { worker.Main(service, run) }
