// Package media is dubflow's audio and video toolbox: a guarded runner for
// ffmpeg and ffprobe (local files only, whitelisted protocols and demuxers,
// a timeout on every run, bounded stderr quoted in errors), probing,
// audio extraction, pure-Go WAV reading and writing, the timing fit of
// synthesized segments into the original timeline, assembly of the dub
// track, subtitles and the final mux.
//
// Inputs are treated as untrusted: a file that is not media, has no audio
// stream, is truncated or is too long yields an error marked with
// fault.Permanent, so the step runtime dead-letters it instead of retrying.
package media
