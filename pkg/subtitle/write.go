package subtitle

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// Cue is one subtitle: a line's text, who says it and when.
type Cue struct {
	StartMS int
	EndMS   int
	// Text is what is said. Parse joins a cue's lines with a space; a
	// writer keeps the line breaks it is given (blank lines dropped).
	Text string
	// Speaker names who says it ("" when the file does not say): a WebVTT
	// voice span's name or a leading "Name:" or "[Name]".
	Speaker string
	// Second, when not blank, is shown below Text in italics: the other
	// language of a bilingual subtitle. Parse never sets it.
	Second string
}

// Format is a subtitle file format.
type Format string

// The formats Parse reads and Write writes.
const (
	SRT    Format = "srt" // SubRip
	WebVTT Format = "vtt" // WebVTT, what browsers' <track> elements read
)

// Formats are the formats in the order outputs list them.
var Formats = []Format{SRT, WebVTT}

// Ext returns the file name extension of f, without the dot: "srt", "vtt".
func (f Format) Ext() string { return string(f) }

// ContentType returns the media type of f.
func (f Format) ContentType() string {
	if f == WebVTT {
		return "text/vtt"
	}
	return "application/x-subrip"
}

// Write writes cues in format f (WriteSRT or WriteVTT).
func Write(w io.Writer, f Format, cues []Cue) error {
	if f == WebVTT {
		return WriteVTT(w, cues)
	}
	return WriteSRT(w, cues)
}

// WriteSRT writes cues as SubRip, numbered from 1 in the given order. Cues
// whose text is blank are left out; blank lines inside a text, which would
// end the cue early, are dropped, and line endings become "\n". A speaker
// is written as a leading "[Name] ". SubRip has no escapes: a text that
// holds what SubRip reads as formatting (a literal "<i>" or "{\an8}") is
// read back without it.
func WriteSRT(w io.Writer, cues []Cue) error {
	return writeCues(w, cues, "", srtTime, func(s string) string { return s },
		func(name string) string { return "[" + name + "] " })
}

// WriteVTT writes cues as WebVTT: like WriteSRT, with the text escaped (&,
// <, >) so that a line such as "a --> b" or "<b>" is shown as written, and
// a speaker written as a voice span "<v Name>".
func WriteVTT(w io.Writer, cues []Cue) error {
	esc := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")
	return writeCues(w, cues, "WEBVTT\n\n", vttTime, esc.Replace,
		func(name string) string { return "<v " + esc.Replace(name) + ">" })
}

// Bilingual pairs each cue of first with the text of the cue of second at
// the same index as its Second line.
func Bilingual(first, second []Cue) []Cue {
	out := make([]Cue, len(first))
	for i, c := range first {
		if i < len(second) {
			c.Second = second[i].Text
		}
		out[i] = c
	}
	return out
}

func writeCues(w io.Writer, cues []Cue, header string, stamp func(int) string, escape, voice func(string) string) error {
	bw := bufio.NewWriter(w)
	bw.WriteString(header)
	n := 0
	for i, c := range cues {
		if c.StartMS < 0 || c.EndMS < c.StartMS {
			return fmt.Errorf("write subtitles: cue %d has bad times %d..%d ms", i, c.StartMS, c.EndMS)
		}
		text, second := cueText(c.Text), cueText(c.Second)
		if text == "" && second == "" {
			continue
		}
		text = escape(text)
		if speaker := strings.TrimSpace(c.Speaker); speaker != "" && text != "" {
			text = voice(speaker) + text
		}
		if second != "" {
			text = strings.TrimPrefix(text+"\n<i>"+strings.ReplaceAll(escape(second), "\n", "</i>\n<i>")+"</i>", "\n")
		}
		n++
		fmt.Fprintf(bw, "%d\n%s --> %s\n%s\n\n", n, stamp(c.StartMS), stamp(c.EndMS), text)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write subtitles: %w", err)
	}
	return nil
}

// cueText returns s with its lines trimmed and blank lines dropped.
func cueText(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

func srtTime(ms int) string {
	return fmt.Sprintf("%02d:%02d:%02d,%03d", ms/3600000, ms/60000%60, ms/1000%60, ms%1000)
}

func vttTime(ms int) string {
	return fmt.Sprintf("%02d:%02d:%02d.%03d", ms/3600000, ms/60000%60, ms/1000%60, ms%1000)
}
