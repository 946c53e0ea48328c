// Command mux_video is the last step of the dubbing chain: it fits each
// synthesized segment into its slot, assembles the dub track, writes the
// subtitles and muxes the dubbed video, then marks the task done.
package main

import "github.com/dubflow/dubflow/pkg/worker"

const service = "mux_video"

// main serves the step; run (config.go) builds its handler from the
// configuration.
func main() { worker.Main(service, run) }
