package cli

import "testing"

func TestEscapeText(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"plain, ñandú, 日本":        "plain, ñandú, 日本",
		"red \x1b[31mtext\x1b[0m": `red \u001b[31mtext\u001b[0m`,
		"ab\u202ecd":              `ab\u202ecd`,
		"c1 \u0085 del \x7f":      `c1 \u0085 del \u007f`,
		"latin1 \xe9":             `latin1 \xe9`,
		"tab\tline\n":             `tab\u0009line\u000a`,
		"rtl mark \u200f":         "rtl mark \u200f",
	} {
		if got := Cell(in); got != want {
			t.Errorf("cell(%q) = %q, want %q", in, got, want)
		}
	}
	if got := escapeText("a\tb\nc\x1b", "\n\t"); got != "a\tb\nc\\u001b" {
		t.Errorf("escapeText keeping tabs and line feeds = %q", got)
	}
}
