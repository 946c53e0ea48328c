package admittest

import (
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dubflow/dubflow/pkg/admit"
)

// BadSubtitle is a request with a malformed subtitle file (or subtitle
// setting) that every door must refuse with pkg/admit's text: the console's
// multipart and presigned doors, dubctl submit in both modes, and
// extract_audio for an outside publisher's payload.
type BadSubtitle struct {
	Name string
	// Subtitles and SourceSubtitles are the files' bytes; Language,
	// Targets ("" for the default, "es,ca" for two) and Burn the
	// settings.
	Subtitles, SourceSubtitles, Language, Targets, Burn string
	// Text is the start of the refusal's text, beside what pkg/admit says
	// (Refusal), and Kind its kind.
	Text string
	Kind admit.Kind
	// Request tells a refusal of the request's settings from one of the
	// file's: a payload carries no target list or burn value the schema
	// refuses before any door's check (extract_audio skips those).
	Request bool
}

// NotJSON reports whether the case holds bytes a JSON string cannot carry
// (invalid UTF-8): the presigned door's JSON body cannot send them.
func (b BadSubtitle) NotJSON() bool {
	return !validUTF8(b.Subtitles) || !validUTF8(b.SourceSubtitles)
}

func validUTF8(s string) bool { return utf8.ValidString(s) }

// AdmitRequest is the case as a door's admit.Request.
func (b BadSubtitle) AdmitRequest() admit.Request {
	req := admit.Request{Subtitles: b.Subtitles, SubtitlesLanguage: b.Language, SourceSubtitles: b.SourceSubtitles,
		BurnSubtitles: b.Burn}
	if b.Targets != "" {
		req.Targets = []string{b.Targets}
	}
	return req
}

// Refusal is what pkg/admit says of the case for a video of length d:
// Check's refusal, else the subtitles' against the video (FitVideo).
func (b BadSubtitle) Refusal(rules admit.Rules, d time.Duration) error {
	t, err := admit.Check(b.AdmitRequest(), rules)
	if err != nil {
		return err
	}
	return t.FitVideo(d)
}

// srt builds a SubRip file from its cues' lines.
func srt(lines ...string) string { return strings.Join(lines, "\n") + "\n" }

// BadSubtitles is the table of malformed subtitle files and settings
// (issue 49), for a video of a few seconds in English dubbed into Spanish.
var BadSubtitles = []BadSubtitle{
	{Name: "blank file", Subtitles: "\ufeff\n \r\n", Text: "subtitles: no cues: the file is empty", Kind: admit.Invalid},
	{Name: "UTF-16", Subtitles: "\xff\xfe1\x00\n\x00", Text: "subtitles: line 1: the file is UTF-16; save it as UTF-8", Kind: admit.Invalid},
	{Name: "Latin-1", Subtitles: srt("1", "00:00:00,100 --> 00:00:00,500", "hola", "", "2", "00:00:00,500 --> 00:00:00,900", "caf\xe9"),
		Text: "subtitles: line 7: not valid UTF-8; save the file as UTF-8", Kind: admit.Invalid},
	{Name: "not subtitles", Subtitles: "hello\nworld\n", Text: `subtitles: line 1: want a cue (a number, then a time range such as 00:00:01,000 --> 00:00:02,500), found "hello"`,
		Kind: admit.Invalid},
	{Name: "broken time range", Subtitles: srt("1", "00:00:01 --> 00:00:02", "hi"), Text: `subtitles: line 2: cannot read the time range "00:00:01 --> 00:00:02"`,
		Kind: admit.Invalid},
	{Name: "ends before it starts", Subtitles: srt("1", "00:00:00,800 --> 00:00:00,200", "hi"),
		Text: "subtitles: line 2: the cue ends (00:00:00,200) before it starts (00:00:00,800)", Kind: admit.Invalid},
	{Name: "overlapping cues", Subtitles: srt("1", "00:00:00,100 --> 00:00:00,600", "hi", "", "2", "00:00:00,500 --> 00:00:00,900", "ho"),
		Text: "subtitles: line 6: the cue starts (00:00:00,500) before the one before it ends (00:00:00,600); cues must not overlap", Kind: admit.Invalid},
	{Name: "past the video's end", Subtitles: "WEBVTT\n\n00:00.100 --> 00:00.500\nhi\n\n00:59.000 --> 01:00.000\nho\n",
		Text: "subtitles: line 6: the cue ends at 00:01:00.000, past the end of the video (", Kind: admit.Invalid},
	{Name: "an override in a line", Subtitles: srt("1", "00:00:00,100 --> 00:00:00,500", "ab\u202ecd"),
		Text: "subtitles: line 3: U+202E (RIGHT-TO-LEFT OVERRIDE) at character 3", Kind: admit.Invalid},
	{Name: "a voice named with brackets", Subtitles: "WEBVTT\n\n00:00.100 --> 00:00.500\n<v a&lt;b>hi\n",
		Text: `subtitles: line 4: speaker name "a<b" holds a bracket`, Kind: admit.Invalid},
	{Name: "source text unreadable", Subtitles: srt("1", "00:00:00,100 --> 00:00:00,500", "hola"), Language: "es",
		SourceSubtitles: srt("1", "00:00:00,100 --> 00:00:00,500", "red \x1b[31m"),
		Text:            "source subtitles: line 3: U+001B (ESCAPE) at character 5", Kind: admit.Invalid},
	{Name: "language neither source nor target", Subtitles: srt("1", "00:00:00,100 --> 00:00:00,500", "salut"), Language: "fr",
		Text: "subtitles: language fr is neither the source (en) nor the target (es)", Kind: admit.Invalid, Request: true},
	{Name: "several targets", Subtitles: srt("1", "00:00:00,100 --> 00:00:00,500", "hi"), Targets: "es,ca",
		Text: "subtitles: a task from subtitles dubs into one language, not 2", Kind: admit.Invalid, Request: true},
	{Name: "source text beside source subtitles", Subtitles: srt("1", "00:00:00,100 --> 00:00:00,500", "hi"),
		SourceSubtitles: srt("1", "00:00:00,100 --> 00:00:00,500", "hi"),
		Text:            "source subtitles: the source text of subtitles in the target language", Kind: admit.Invalid, Request: true},
	{Name: "burn what", Burn: "source", Text: `burn subtitles "source": want target or bilingual`, Kind: admit.Invalid, Request: true},
	{Name: "over the size limit", Subtitles: srt("1", "00:00:00,100 --> 00:00:00,500", strings.Repeat("a", admit.MaxSubtitlesBytes)),
		Text: "subtitles: more than 1048576 bytes", Kind: admit.TooLarge},
}
