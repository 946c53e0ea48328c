package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Table writes rows in aligned columns under a header.
type Table struct{ tw *tabwriter.Writer }

// NewTable starts a table on w with the header's cells (none: no header).
func NewTable(w io.Writer, header ...string) *Table {
	t := &Table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	if len(header) > 0 {
		t.Row(toAny(header)...)
	}
	return t
}

// Row adds a row; each cell is printed as fmt.Sprint prints it, with
// unsafe characters, tabs and line feeds escaped (cell).
func (t *Table) Row(cells ...any) {
	s := make([]string, len(cells))
	for i, c := range cells {
		s[i] = Cell(c)
	}
	fmt.Fprintln(t.tw, strings.Join(s, "\t"))
}

// Flush writes the table out.
func (t *Table) Flush() error { return t.tw.Flush() }

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
