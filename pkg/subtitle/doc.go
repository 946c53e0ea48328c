// Package subtitle reads and writes the subtitle files people bring and take
// away: SubRip (.srt) and WebVTT (.vtt).
//
// Parse reads either format into cues — start and end in milliseconds, the
// text on one line, the speaker — and refuses, with the line the problem is
// on, what a dub cannot be made from: a file that is not UTF-8 (a UTF-8
// byte-order mark is skipped), a time range that cannot be read, a cue that
// ends before it starts, overlaps the one before it or ends past the
// video, text that breaks the text rule (textrule.Check), or a file without
// a single cue. Speakers come from WebVTT voice spans (<v Anna>) or a
// leading "Name:" or "[Name]".
//
// WriteSRT and WriteVTT write cues back; what Parse reads from their output
// is what they were given (times, text, speaker). dubflow's outputs
// (mux_video's final.<lang>.srt and .vtt), a task from a person's file
// (pkg/admit) and the review's export and import all go through this one
// reader and writer. The package is a leaf: it imports only the standard
// library and the text rule.
package subtitle
