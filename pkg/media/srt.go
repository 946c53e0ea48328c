package media

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// Cue is one subtitle: a segment's text and where it is spoken.
type Cue struct {
	StartMS int
	EndMS   int
	Text    string
	// Second, when not blank, is shown below Text in italics: the other
	// language of a bilingual subtitle.
	Second string
}

// WriteSRT writes cues as SubRip, numbered from 1 in the given order. Cues
// whose text is blank are left out; blank lines inside a text, which would
// end the cue early, are dropped, and line endings become "\n".
func WriteSRT(w io.Writer, cues []Cue) error {
	return writeCues(w, cues, "", srtTime, func(s string) string { return s })
}

// WriteVTT writes cues as WebVTT, the format browsers' <track> elements
// read: like WriteSRT, with the text escaped (&, <, >) so that a line such
// as "a --> b" or "<b>" is shown as written.
func WriteVTT(w io.Writer, cues []Cue) error {
	esc := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")
	return writeCues(w, cues, "WEBVTT\n\n", vttTime, esc.Replace)
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

func writeCues(w io.Writer, cues []Cue, header string, stamp func(int) string, escape func(string) string) error {
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
