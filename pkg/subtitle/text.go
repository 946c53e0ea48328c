package subtitle

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dubflow/dubflow/pkg/textrule"
)

// MaxSpeakerRunes bounds a speaker's name.
const MaxSpeakerRunes = 32

// CheckSpeaker reports whether name can name a speaker: 1 to
// MaxSpeakerRunes characters once trimmed, within the text rule, without
// the brackets [ ] < > that would end it in a file. A name that passes is
// written so that Parse reads it back.
func CheckSpeaker(name string) error {
	name = strings.TrimSpace(name)
	switch n := utf8.RuneCountInString(name); {
	case n == 0:
		return errors.New("a speaker's name is empty")
	case n > MaxSpeakerRunes:
		return fmt.Errorf("speaker name %q is longer than %d characters", clip(name), MaxSpeakerRunes)
	case strings.ContainsAny(name, "[]<>"):
		return fmt.Errorf("speaker name %q holds a bracket ([ ] < >)", name)
	}
	if err := textrule.Check(name); err != nil {
		return fmt.Errorf("speaker name %q: %w", name, err)
	}
	return nil
}

// timeRange matches a line that holds a cue's time range: hours optional,
// a comma or a dot before the milliseconds, anything after a space (cue
// settings, SubRip's coordinates).
var timeRange = regexp.MustCompile(`^\s*(?:(\d{1,4}):)?(\d{1,2}):(\d{1,2})[,.](\d{1,3})\s*-->\s*(?:(\d{1,4}):)?(\d{1,2}):(\d{1,2})[,.](\d{1,3})(?:\s.*)?$`)

// parseRange reads a time range line into milliseconds.
func parseRange(line string) (start, end int, err error) {
	m := timeRange.FindStringSubmatch(line)
	if m == nil {
		return 0, 0, fmt.Errorf("cannot read the time range %q", clip(line))
	}
	if start, err = stampMS(m[1:5]); err == nil {
		end, err = stampMS(m[5:9])
	}
	return start, end, err
}

// stampMS reads hours (maybe empty), minutes, seconds and milliseconds.
func stampMS(f []string) (int, error) {
	h := 0
	if f[0] != "" {
		h, _ = strconv.Atoi(f[0])
	}
	m, _ := strconv.Atoi(f[1])
	s, _ := strconv.Atoi(f[2])
	ms, _ := strconv.Atoi(f[3])
	stamp := f[1] + ":" + f[2] + "," + f[3]
	if f[0] != "" {
		stamp = f[0] + ":" + stamp
	}
	switch {
	case m > 59 || s > 59:
		return 0, fmt.Errorf("time %s: minutes and seconds go up to 59", stamp)
	case len(f[2]) != 2 || len(f[3]) != 3:
		return 0, fmt.Errorf("time %s: write seconds with two digits and milliseconds with three (00:00:01,500)", stamp)
	}
	return ((h*60+m)*60+s)*1000 + ms, nil
}

// srtText drops a SubRip line's formatting: the tags <i> <b> <u> <s> and
// <font …> (opening and closing, any case) and {\…} overrides. A tag is
// dropped as soon as the text kept so far ends with one, so that a tag
// hidden inside another goes too ("<<i>i>" leaves nothing) and no tag is
// left, in one pass over the line.
func srtText(line string) string {
	var t tagStripper
	for i := 0; i < len(line); i++ {
		t.add(line[i])
	}
	return string(t.buf)
}

// tagStripper keeps the text of a line with SubRip's tags dropped; it
// remembers where in buf each bracket that may open or close a tag is.
type tagStripper struct {
	buf                         []byte
	angles, closeAngles, braces []int
	closeBraces                 []int
}

// add appends c and drops the tag it closes, if any.
func (t *tagStripper) add(c byte) {
	t.buf = append(t.buf, c)
	at := len(t.buf) - 1
	switch c {
	case '<':
		t.angles = append(t.angles, at)
	case '{':
		t.braces = append(t.braces, at)
	case '>':
		if p, ok := lastOpen(t.angles, t.closeAngles); ok && htmlTag(t.buf[p:]) {
			t.cut(p)
			return
		}
		t.closeAngles = append(t.closeAngles, at)
	case '}':
		if p, ok := lastOpen(t.braces, t.closeBraces); ok && bytes.HasPrefix(t.buf[p:], []byte("{\\")) {
			t.cut(p)
			return
		}
		t.closeBraces = append(t.closeBraces, at)
	}
}

// lastOpen returns the last opening bracket with no closing one after it.
func lastOpen(opens, closes []int) (int, bool) {
	if len(opens) == 0 || len(closes) > 0 && closes[len(closes)-1] > opens[len(opens)-1] {
		return 0, false
	}
	return opens[len(opens)-1], true
}

// cut drops buf from p on, and the brackets it held.
func (t *tagStripper) cut(p int) {
	t.buf = t.buf[:p]
	for _, s := range []*[]int{&t.angles, &t.closeAngles, &t.braces, &t.closeBraces} {
		for len(*s) > 0 && (*s)[len(*s)-1] >= p {
			*s = (*s)[:len(*s)-1]
		}
	}
}

// htmlTag reports whether tag, from < to >, is one SubRip players read.
func htmlTag(tag []byte) bool {
	name := strings.ToLower(string(tag[1 : len(tag)-1]))
	switch strings.TrimPrefix(name, "/") {
	case "i", "b", "u", "s", "font":
		return true
	}
	return strings.HasPrefix(name, "font") && len(name) > 4 && strings.ContainsRune(" \t\n\f\r\v", rune(name[4]))
}

// vttText drops a WebVTT line's tags and decodes its character
// references; voice is the name of the line's first voice span.
func vttText(line string) (text, voice string) {
	var b strings.Builder
	for line != "" {
		switch line[0] {
		case '<':
			tag, rest, _ := strings.Cut(line[1:], ">")
			if v, ok := voiceName(tag); ok && voice == "" {
				voice = v
			}
			line = rest
		case '&':
			r, n := reference(line)
			b.WriteString(r)
			line = line[n:]
		default:
			i := strings.IndexAny(line, "<&")
			if i < 0 {
				i = len(line)
			}
			b.WriteString(line[:i])
			line = line[i:]
		}
	}
	return b.String(), voice
}

// voiceName returns the annotation of a voice span's start tag ("v Anna",
// "v.loud Anna Smith"), its references decoded and trimmed.
func voiceName(tag string) (string, bool) {
	if !strings.HasPrefix(tag, "v") || len(tag) > 1 && !strings.ContainsRune(". \t", rune(tag[1])) {
		return "", false
	}
	i := strings.IndexAny(tag, " \t")
	if i < 0 {
		return "", false
	}
	name, _ := vttText(tag[i+1:])
	name = strings.TrimSpace(name)
	return name, name != ""
}

// entity matches a character reference.
var entity = regexp.MustCompile(`^&(?:#([0-9]{1,7})|#[xX]([0-9a-fA-F]{1,6})|([A-Za-z]{2,8}));`)

// entities are the named references WebVTT files use.
var entities = map[string]string{"amp": "&", "lt": "<", "gt": ">", "nbsp": "\u00a0", "lrm": "\u200e", "rlm": "\u200f",
	"quot": `"`, "apos": "'"}

// reference decodes the character reference at the start of s: its text
// and its length; an unknown one is kept as written.
func reference(s string) (string, int) {
	m := entity.FindStringSubmatch(s)
	switch {
	case m == nil:
		return "&", 1
	case m[1] != "":
		n, _ := strconv.Atoi(m[1])
		return string(rune(n)), len(m[0])
	case m[2] != "":
		n, _ := strconv.ParseInt(m[2], 16, 32)
		return string(rune(n)), len(m[0])
	}
	if r, ok := entities[m[3]]; ok {
		return r, len(m[0])
	}
	return m[0], len(m[0])
}

// bracketSpeaker and colonSpeaker match a cue that names its speaker
// first: "[Anna] Hello" or "Anna: Hello" (a name of one to three words that
// starts with a letter).
var (
	bracketSpeaker = regexp.MustCompile(`^\[([^\[\]]+)\]\s*(\S.*)$`)
	colonSpeaker   = regexp.MustCompile(`^(\pL[\pL\pM\pN'’._-]*(?: [\pL\pM\pN'’._-]+){0,2}):\s+(\S.*)$`)
)

// leadingSpeaker splits a leading "[Name]" or "Name:" from text.
func leadingSpeaker(text string) (speaker, rest string) {
	for _, re := range []*regexp.Regexp{bracketSpeaker, colonSpeaker} {
		if m := re.FindStringSubmatch(text); m != nil && CheckSpeaker(m[1]) == nil {
			return strings.TrimSpace(m[1]), m[2]
		}
	}
	return "", text
}
