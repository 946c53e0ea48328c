package subtitle

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/dubflow/dubflow/pkg/textrule"
)

// ErrInvalid is what every refusal of Parse wraps (as an *Error).
var ErrInvalid = errors.New("invalid subtitles")

// Error is a refused subtitle file: what is wrong and on which line.
type Error struct {
	// Line is the line of the file the problem is on, from 1; 0 when it
	// is the whole file's (no cues at all).
	Line int
	// Reason says what is wrong, in words a person acts on.
	Reason string
}

// Error returns "line 12: reason", or the reason alone for the whole file.
func (e *Error) Error() string {
	if e.Line == 0 {
		return e.Reason
	}
	return fmt.Sprintf("line %d: %s", e.Line, e.Reason)
}

// Is reports ErrInvalid as the kind of every *Error.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

func errorf(line int, format string, args ...any) *Error {
	return &Error{Line: line, Reason: fmt.Sprintf(format, args...)}
}

// ReasonEmpty is the reason Parse refuses a file without a cue for.
const ReasonEmpty = "no cues: the file is empty"

// Limits bound what Parse accepts beyond the formats' own rules.
type Limits struct {
	// DurationMS, when > 0, is the video's length: a cue that ends after
	// it is refused.
	DurationMS int
	// MaxCues, when > 0, bounds the number of cues.
	MaxCues int
}

// Detect returns the format of data: WebVTT when it starts (after a
// byte-order mark) with the WEBVTT signature, else SRT.
func Detect(data []byte) Format {
	data = bytes.TrimPrefix(data, []byte(bom))
	if rest, ok := bytes.CutPrefix(data, []byte("WEBVTT")); ok && (len(rest) == 0 || strings.ContainsRune(" \t\r\n", rune(rest[0]))) {
		return WebVTT
	}
	return SRT
}

const bom = "\ufeff"

// Parse reads a SubRip or WebVTT file (Detect tells which) into its cues,
// in the file's order. A cue's lines are joined with a space; formatting
// (<i>, <b>, <font>, {\an8}, WebVTT's classes, voices and timestamps) is
// dropped and WebVTT's character references are decoded; a cue whose text
// is then blank is left out. Every refusal is an *Error wrapping
// ErrInvalid that names its line.
func Parse(data []byte, lim Limits) ([]Cue, error) {
	lines, err := splitLines(data)
	if err != nil {
		return nil, err
	}
	p := &parser{lines: lines, vtt: Detect(data) == WebVTT, lim: lim}
	if p.vtt {
		err = p.webvtt()
	} else {
		err = p.srt()
	}
	if err != nil {
		return nil, err
	}
	if len(p.cues) == 0 {
		if p.blocks > 0 {
			return nil, errorf(0, "no cue has any text")
		}
		return nil, errorf(0, "%s", ReasonEmpty)
	}
	return p.cues, nil
}

// splitLines checks that data is UTF-8 text and returns its lines (CRLF,
// CR and LF all end a line), without a leading byte-order mark.
func splitLines(data []byte) ([]string, error) {
	if bytes.HasPrefix(data, []byte{0xFF, 0xFE}) || bytes.HasPrefix(data, []byte{0xFE, 0xFF}) {
		return nil, errorf(1, "the file is UTF-16; save it as UTF-8")
	}
	data = bytes.TrimPrefix(data, []byte(bom))
	if !utf8.Valid(data) {
		bad := 0
		for bad < len(data) {
			r, size := utf8.DecodeRune(data[bad:])
			if r == utf8.RuneError && size <= 1 {
				break
			}
			bad += size
		}
		before := strings.ReplaceAll(string(data[:bad]), "\r\n", "\n")
		return nil, errorf(1+strings.Count(before, "\n")+strings.Count(before, "\r"), "not valid UTF-8; save the file as UTF-8")
	}
	s := strings.ReplaceAll(string(data), "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	return strings.Split(s, "\n"), nil
}

// parser walks a file's lines; line i of lines is line i+1 of the file.
type parser struct {
	lines  []string
	i      int
	vtt    bool
	lim    Limits
	cues   []Cue
	blocks int // cues read, with text or without
}

// blank reports whether line i is past the end or holds only spaces.
func (p *parser) blank(i int) bool {
	return i >= len(p.lines) || strings.TrimSpace(p.lines[i]) == ""
}

// skipBlank moves past blank lines; it reports whether a line is left.
func (p *parser) skipBlank() bool {
	for p.i < len(p.lines) && p.blank(p.i) {
		p.i++
	}
	return p.i < len(p.lines)
}

// cueStart reports whether a cue starts at line i: a time range, or an
// identifier (a number in SubRip) followed by one.
func (p *parser) cueStart(i int) bool {
	if i >= len(p.lines) {
		return false
	}
	if timeRange.MatchString(p.lines[i]) {
		return true
	}
	return i+1 < len(p.lines) && p.identifier(p.lines[i]) && timeRange.MatchString(p.lines[i+1])
}

// textEnds reports whether a cue's text, without a blank line, ends at
// line i because the next cue starts there: a time range (WebVTT ends a
// cue's text at any line holding "-->"), or in SubRip also a number
// followed by one.
func (p *parser) textEnds(i int) bool {
	if p.vtt {
		return strings.Contains(p.lines[i], "-->")
	}
	return p.cueStart(i)
}

// identifier reports whether line may name the cue on the next line.
func (p *parser) identifier(line string) bool {
	if p.vtt {
		return !strings.Contains(line, "-->") && strings.TrimSpace(line) != ""
	}
	line = strings.TrimSpace(line)
	return line != "" && strings.Trim(line, "0123456789") == ""
}

// srt reads SubRip cues: an optional number, a time range, text lines.
func (p *parser) srt() error {
	for p.skipBlank() {
		if !p.cueStart(p.i) {
			return p.notACue()
		}
		if err := p.cue(); err != nil {
			return err
		}
	}
	return nil
}

// webvtt reads WebVTT: the signature line and its header up to a blank
// line, then blocks: NOTE, STYLE and REGION blocks are skipped, every
// other block is a cue (an optional identifier, a time range, text lines).
func (p *parser) webvtt() error {
	for p.i < len(p.lines) && !p.blank(p.i) && !strings.Contains(p.lines[p.i], "-->") {
		p.i++
	}
	for p.skipBlank() {
		if f := strings.Fields(p.lines[p.i]); f[0] == "NOTE" || f[0] == "STYLE" || f[0] == "REGION" {
			for !p.blank(p.i) {
				p.i++
			}
			continue
		}
		if !p.cueStart(p.i) {
			return p.notACue()
		}
		if err := p.cue(); err != nil {
			return err
		}
	}
	return nil
}

// notACue refuses line i, where a cue should start.
func (p *parser) notACue() error {
	line := p.lines[p.i]
	if strings.Contains(line, "-->") {
		return errorf(p.i+1, "cannot read the time range %q; write it as %s", clip(line), p.example())
	}
	if p.identifier(line) && p.i+1 < len(p.lines) && strings.Contains(p.lines[p.i+1], "-->") {
		p.i++
		return p.notACue()
	}
	return errorf(p.i+1, "want a cue (a number, then a time range such as %s), found %q", p.example(), clip(line))
}

// example is a time range written as the file's format writes it.
func (p *parser) example() string {
	if p.vtt {
		return "00:00:01.000 --> 00:00:02.500"
	}
	return "00:00:01,000 --> 00:00:02,500"
}

// clip shortens a line quoted in a refusal.
func clip(s string) string {
	if utf8.RuneCountInString(s) <= 60 {
		return s
	}
	return string([]rune(s)[:60]) + "…"
}

// cue reads the cue at line i (the caller checked cueStart) and moves past
// its text: up to a blank line or the start of the next cue.
func (p *parser) cue() error {
	if !timeRange.MatchString(p.lines[p.i]) {
		p.i++ // the identifier
	}
	at := p.i + 1
	start, end, err := parseRange(p.lines[p.i])
	if err != nil {
		return errorf(at, "%s", err)
	}
	p.i++
	first := p.i
	for p.i < len(p.lines) && !p.blank(p.i) && !p.textEnds(p.i) {
		p.i++
	}
	return p.add(at, start, end, first, p.i)
}

// add checks the cue of the time range on line at, whose text is lines
// [from, to), and appends it unless its text is blank.
func (p *parser) add(at, start, end, from, to int) error {
	p.blocks++
	if p.lim.MaxCues > 0 && p.blocks > p.lim.MaxCues {
		return errorf(at, "more than %d cues", p.lim.MaxCues)
	}
	stamp := p.stamp
	switch {
	case end <= start:
		return errorf(at, "the cue ends (%s) before it starts (%s)", stamp(end), stamp(start))
	case p.lim.DurationMS > 0 && end > p.lim.DurationMS:
		return errorf(at, "the cue ends at %s, past the end of the video (%s)", stamp(end), stamp(p.lim.DurationMS))
	case len(p.cues) > 0 && start < p.cues[len(p.cues)-1].EndMS:
		prev := p.cues[len(p.cues)-1]
		return errorf(at, "the cue starts (%s) before the one before it ends (%s); cues must not overlap",
			stamp(start), stamp(prev.EndMS))
	}
	text, speaker, err := p.text(from, to)
	if err != nil {
		return err
	}
	if text != "" {
		p.cues = append(p.cues, Cue{StartMS: start, EndMS: end, Text: text, Speaker: speaker})
	}
	return nil
}

// stamp writes ms as the file's format writes times.
func (p *parser) stamp(ms int) string {
	if p.vtt {
		return vttTime(ms)
	}
	return srtTime(ms)
}

// text returns the text of lines [from, to), cleaned of formatting and
// joined with spaces, and its speaker; each line obeys the text rule.
func (p *parser) text(from, to int) (text, speaker string, err error) {
	var parts []string
	for i := from; i < to; i++ {
		line, voice := p.clean(p.lines[i])
		if err := textrule.Check(line); err != nil {
			return "", "", errorf(i+1, "%s", err)
		}
		if voice != "" && speaker == "" {
			if err := CheckSpeaker(voice); err != nil {
				return "", "", errorf(i+1, "%s", err)
			}
			speaker = voice
		}
		if line = strings.Join(strings.Fields(line), " "); line != "" {
			parts = append(parts, line)
		}
	}
	text = strings.Join(parts, " ")
	if timeRange.MatchString(text) {
		// Written back, the text would start a cue of its own.
		return "", "", errorf(from+1, "the cue's text %q reads as a time range", clip(text))
	}
	if speaker == "" {
		speaker, text = leadingSpeaker(text)
	}
	return text, speaker, nil
}

// clean drops a line's formatting: WebVTT's tags (and the name of its
// first voice span) and character references, or SubRip's HTML-like tags
// and {\...} overrides.
func (p *parser) clean(line string) (text, voice string) {
	if p.vtt {
		return vttText(line)
	}
	return srtText(line), ""
}
