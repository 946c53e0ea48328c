package apierr

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// Bounds of what an error message repeats of a request: a value quoted in
// it (an id, a parameter) or any unbroken run of characters (a path) keeps
// at most maxEcho characters, the message at most maxMessage; what is cut
// ends with "…".
const (
	maxEcho    = 100
	maxMessage = 1000
)

// echoed matches a quoted value (as %q writes it) or a run of characters
// without spaces or quotes.
var echoed = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|[^\s"]+`)

// CapEchoes shortens every value msg repeats to maxEcho characters and msg
// to maxMessage, so that a 100 kB id is not sent back whole.
func CapEchoes(msg string) string {
	msg = echoed.ReplaceAllStringFunc(msg, func(v string) string {
		if utf8.RuneCountInString(v) <= maxEcho+2 {
			return v
		}
		if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
			return `"` + cut(v[1:len(v)-1], maxEcho) + `"`
		}
		return cut(v, maxEcho)
	})
	if utf8.RuneCountInString(msg) > maxMessage {
		msg = cut(msg, maxMessage)
	}
	return msg
}

// cut returns the first n characters of s followed by "…".
func cut(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j] + "…"
		}
		i++
	}
	return s
}

// CutEcho keeps at most maxEcho bytes of a path the client sent, as
// valid UTF-8.
func CutEcho(p string) string {
	if len(p) > maxEcho {
		p = p[:maxEcho]
	}
	return strings.ToValidUTF8(p, "")
}
