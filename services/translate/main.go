// Command translate is the machine-translation step of the dubbing chain: it
// translates one batch of a task's segments, and the batch that completes
// the task's translation hands the task to tts.
package main

import "github.com/dubflow/dubflow/pkg/worker"

const service = "translate"

// main serves the step; run (config.go) builds its handler from the
// configuration.
func main() { worker.Main(service, run) }
