// Command extract_audio is the first step of the dubbing chain: it checks the
// uploaded video with ffprobe, extracts its speech track as mono 16 kHz PCM
// WAV with ffmpeg, stores it and hands the task to asr.
package main

import "github.com/dubflow/dubflow/pkg/worker"

const service = "extract_audio"

// main serves the step; run (config.go) builds its handler from the
// configuration.
func main() { worker.Main(service, run) }
