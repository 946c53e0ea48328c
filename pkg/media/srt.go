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
}

// WriteSRT writes cues as SubRip, numbered from 1 in the given order. Cues
// whose text is blank are left out; blank lines inside a text, which would
// end the cue early, are dropped, and line endings become "\n".
func WriteSRT(w io.Writer, cues []Cue) error {
	bw := bufio.NewWriter(w)
	n := 0
	for i, c := range cues {
		if c.StartMS < 0 || c.EndMS < c.StartMS {
			return fmt.Errorf("write SRT: cue %d has bad times %d..%d ms", i, c.StartMS, c.EndMS)
		}
		text := srtText(c.Text)
		if text == "" {
			continue
		}
		n++
		fmt.Fprintf(bw, "%d\n%s --> %s\n%s\n\n", n, srtTime(c.StartMS), srtTime(c.EndMS), text)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write SRT: %w", err)
	}
	return nil
}

func srtText(s string) string {
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
