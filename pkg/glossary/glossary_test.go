package glossary_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/glossary"
	"github.com/dubflow/dubflow/pkg/wire"
)

func TestParseCSV(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, csv string
		want      []wire.Term
		err       string
	}{
		{name: "a spreadsheet's byte-order mark and header", csv: "\ufeffsource,target\r\ntry,prueba\r\n",
			want: []wire.Term{{Source: "try", Target: "prueba"}}},
		{name: "a byte-order mark before the first term", csv: "\ufefftry,prueba\n",
			want: []wire.Term{{Source: "try", Target: "prueba"}}},
		{name: "comments, blank lines, a quoted comma", csv: "# terms\n\n\"New York, NY\",Nueva York\ndubflow,\n",
			want: []wire.Term{{Source: "New York, NY", Target: "Nueva York"}, {Source: "dubflow"}}},
		{name: "invalid UTF-8 names its line", csv: "a,b\n# note\ncaf\xe9,caf\xe9\n", err: "line 3: not valid UTF-8; save the file as UTF-8"},
		{name: "a repeated source names both lines", csv: "source,target\nTry,a\n# x\nqueue,cola\ntry,b\n",
			err: `line 5: source term "try" is already on line 2; give each term once`},
		{name: "an override in a target", csv: "a,b\ntry,pro\u202ebar\n",
			err: `line 2: target term "pro\u202ebar": U+202E (RIGHT-TO-LEFT OVERRIDE) at character 4`},
		{name: "an isolate in a source", csv: "\u2067try,b\n", err: `line 1: source term "\u2067try": U+2067 (RIGHT-TO-LEFT ISOLATE)`},
		{name: "an escape sequence", csv: "red\x1b[31m,rojo\n", err: `line 1: source term "red\x1b[31m": U+001B (ESCAPE)`},
		{name: "a line break in a quoted field, counted by its line", csv: "a,b\n\n\"two\nlines\",c\n",
			err: `line 3: source term "two\nlines": U+000A (LINE FEED)`},
		{name: "three fields", csv: "a,b\nq,c,x\n", err: "line 2: 3 fields, want source,target"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := glossary.ParseCSV(strings.NewReader(tc.csv))
			if tc.err != "" {
				if !errors.Is(err, glossary.ErrInvalid) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseCSV = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseCSV = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestCheckTermsNamesTheTerm(t *testing.T) {
	t.Parallel()
	if err := glossary.CheckTerms([]wire.Term{{Source: "a", Target: "b"}, {Source: "dubflow"}}); err != nil {
		t.Fatal(err)
	}
	err := glossary.CheckTerms([]wire.Term{{Source: "Try"}, {Source: "b"}, {Source: " try ", Target: "x"}})
	if !errors.Is(err, glossary.ErrInvalid) || !strings.HasSuffix(err.Error(), `term 3: source term " try " is already term 1; give each term once`) {
		t.Fatalf("a term twice: %v", err)
	}
	err = glossary.CheckTerms([]wire.Term{{Source: "a"}, {Source: "b", Target: "\u202dx"}})
	if !strings.HasSuffix(err.Error(), `term 2: target term "\u202dx": U+202D (LEFT-TO-RIGHT OVERRIDE) at character 1: bidirectional overrides and isolates reorder what is shown after them`) {
		t.Fatalf("an override: %v", err)
	}
}
