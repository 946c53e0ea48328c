// Package speech holds dubflow's speech engines: speech recognition
// (Transcriber), machine translation (Translator) and speech synthesis
// (Synthesizer), each with an embedded offline implementation that wraps a
// Debian command-line tool (pocketsphinx, apertium, espeak-ng) and remote
// implementations that speak the real wire protocols of production
// services (OpenAI-compatible transcription, chat completions and speech,
// Apertium APy, and tts_service's POST /synthesize).
//
// Two wrappers add the behaviour the pipeline needs on top of any engine:
// Batcher batches translations, validates them and falls back to single
// items; Chunker splits long audio at silences and transcribes the chunks
// with bounded concurrency.
//
// Errors follow the step runtime's classes: fault.Permanent for errors no
// retry can fix (a 4xx other than 408/429, an unsupported language, a
// response that is not the protocol's shape), fault.RetryAfter for a 429
// with Retry-After, and plain errors for everything transient (5xx,
// timeouts, connection errors, a tool that crashed), and fault.Unavailable
// for a decoder loaded in process that stopped making progress
// (ErrStalled: the process should be replaced).
//
// Pocketsphinx built with the tag pocketsphinx_lib keeps decoders loaded in
// process. The C library keeps state for the whole process; decoders are
// loaded and freed one at a time under libMu (psdecoder_lib.go says what
// that state is and why decodes need no lock).
//
// New picks the engines by name from a Config; nothing here reads the
// environment.
package speech
