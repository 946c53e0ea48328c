// Package textrule is the text rule: what people may write into a dub. A
// glossary's terms, a line edit (Redub) and the cues of a person's subtitle
// file go into translations, subtitles (SRT, WebVTT) and synthesized
// speech, and are shown by the console and dubctl; they are refused, never
// cleaned silently, when they hold
//
//   - bytes that are not UTF-8 (a file saved in another encoding), or the
//     replacement character U+FFFD (what a decoder made of such bytes
//     before the text reached the door: a JSON body's invalid UTF-8);
//   - control characters (C0, DEL, C1: a NUL, an escape sequence, a line
//     break that would start a new subtitle cue);
//   - the bidirectional embeddings, overrides and isolates U+202A–U+202E
//     and U+2066–U+2069 (the "Trojan Source" characters, CVE-2021-42574):
//     they reorder what follows them on screen, in a subtitle or a
//     terminal;
//   - the line and paragraph separators U+2028 and U+2029, and U+FEFF (a
//     byte-order mark inside a text).
//
// The marks U+200E, U+200F and U+061C (left-to-right, right-to-left and
// Arabic letter mark) are kept: Arabic and Hebrew text needs them to place
// punctuation and numbers, and they reorder nothing beyond their
// neighbours. Check is the rule; pkg/dub (CheckText: glossary terms, line
// edits), pkg/subtitle (the cues of a person's subtitle file) and pkg/admit
// apply it, and dubctl escapes the same characters (Unsafe) when it prints
// text that came from people or engines.
package textrule

import (
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// Unsafe reports whether r is refused in people's text and escaped when
// dubctl prints it: a control character, a bidirectional embedding,
// override or isolate, a line or paragraph separator, U+FEFF or U+FFFD.
func Unsafe(r rune) bool {
	switch {
	case unicode.IsControl(r):
		return true
	case r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return r == 0x2028 || r == 0x2029 || r == 0xFEFF || r == utf8.RuneError
}

// runeNames names the unsafe characters people meet most; others are
// described by their class.
var runeNames = map[rune]string{
	0x202A: "LEFT-TO-RIGHT EMBEDDING", 0x202B: "RIGHT-TO-LEFT EMBEDDING", 0x202C: "POP DIRECTIONAL FORMATTING",
	0x202D: "LEFT-TO-RIGHT OVERRIDE", 0x202E: "RIGHT-TO-LEFT OVERRIDE", 0x2066: "LEFT-TO-RIGHT ISOLATE",
	0x2067: "RIGHT-TO-LEFT ISOLATE", 0x2068: "FIRST STRONG ISOLATE", 0x2069: "POP DIRECTIONAL ISOLATE",
	0x2028: "LINE SEPARATOR", 0x2029: "PARAGRAPH SEPARATOR", 0xFEFF: "BYTE ORDER MARK",
	utf8.RuneError: "REPLACEMENT CHARACTER", 0x1B: "ESCAPE", 0x00: "NUL", '\t': "TAB", '\n': "LINE FEED",
	'\r': "CARRIAGE RETURN", 0x7F: "DELETE",
}

// describe names r for a refusal: "U+202E (RIGHT-TO-LEFT OVERRIDE)".
func describe(r rune) string {
	name, ok := runeNames[r]
	if !ok {
		name = "a control character"
	}
	return fmt.Sprintf("U+%04X (%s)", r, name)
}

// why says why r is refused, in words a user acts on.
func why(r rune) string {
	switch {
	case r == utf8.RuneError:
		return "the text was damaged by a conversion from another encoding; send it as UTF-8"
	case r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069:
		return "bidirectional overrides and isolates reorder what is shown after them"
	case r == 0xFEFF:
		return "a byte-order mark belongs only at the start of a file"
	}
	return "control characters and line breaks are not allowed in a term or a line"
}

// Check applies the text rule to s: nil, or an error naming the first
// refused character, its position (in characters, from 1) and why.
func Check(s string) error {
	if !utf8.ValidString(s) {
		return errors.New("not valid UTF-8; send it as UTF-8")
	}
	n := 0
	for _, r := range s {
		n++
		if Unsafe(r) {
			return fmt.Errorf("%s at character %d: %s", describe(r), n, why(r))
		}
	}
	return nil
}
