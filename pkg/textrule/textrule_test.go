package textrule_test

import (
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/textrule"
)

func TestCheckTextRefusesControlsAndOverrides(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		text, want string
	}{
		{"hola", ""},
		{"مرحبا \u200f123", ""},            // a right-to-left mark is kept: Arabic needs it
		{"👩\u200d💻 zero width joiner", ""}, // emoji and Indic scripts need it
		{"ab\u202ecd", "U+202E (RIGHT-TO-LEFT OVERRIDE) at character 3: bidirectional overrides and isolates reorder what is shown after them"},
		{"\u2066x", "U+2066 (LEFT-TO-RIGHT ISOLATE) at character 1"},
		{"red \x1b[31m", "U+001B (ESCAPE) at character 5: control characters and line breaks are not allowed"},
		{"two\nlines", "U+000A (LINE FEED) at character 4"},
		{"nul\x00", "U+0000 (NUL) at character 4"},
		{"c1 \u0085", "U+0085 (a control character) at character 4"},
		{"sep\u2028", "U+2028 (LINE SEPARATOR)"},
		{"in\ufeffside", "U+FEFF (BYTE ORDER MARK) at character 3: a byte-order mark belongs only at the start of a file"},
		{"bro\ufffdken", "U+FFFD (REPLACEMENT CHARACTER) at character 4: the text was damaged by a conversion"},
		{"latin1 \xe9", "not valid UTF-8; send it as UTF-8"},
	} {
		err := textrule.Check(tc.text)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("Check(%q) = %v, want nil", tc.text, err)
		case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
			t.Errorf("Check(%q) = %v, want %q...", tc.text, err, tc.want)
		}
	}
}
