package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// table writes rows in aligned columns under a header.
type table struct{ tw *tabwriter.Writer }

// newTable starts a table on w with the header's cells (none: no header).
func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	if len(header) > 0 {
		t.row(toAny(header)...)
	}
	return t
}

// row adds a row; each cell is printed as fmt.Sprint prints it, with
// unsafe characters, tabs and line feeds escaped (cell).
func (t *table) row(cells ...any) {
	s := make([]string, len(cells))
	for i, c := range cells {
		s[i] = cell(c)
	}
	fmt.Fprintln(t.tw, strings.Join(s, "\t"))
}

// flush writes the table out.
func (t *table) flush() error { return t.tw.Flush() }

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// show runs a command that reads and prints what it read, in either mode:
// load it, then write it as indented JSON (asJSON) or for a reader (print).
func show[T any](cmd *cobra.Command, asJSON bool, load func(context.Context, backend) (T, error),
	print func(io.Writer, T) error) error {
	return withBackend(cmd, func(ctx context.Context, b backend) error {
		v, err := load(ctx, b)
		if err != nil {
			return err
		}
		if asJSON {
			return writeJSON(cmd.OutOrStdout(), v)
		}
		return print(cmd.OutOrStdout(), v)
	})
}

// showCmd completes cmd (its Use, Short and Long set) as a command that
// takes one ID, read by parse (parseTaskID, parseID), and shows what load
// reads about it: as JSON with --json (jsonHelp says what that prints), or
// as print writes it.
func showCmd[K, T any](cmd *cobra.Command, jsonHelp string, parse func(string) (K, error),
	load func(context.Context, backend, K) (T, error), print func(io.Writer, T) error) *cobra.Command {
	var asJSON bool
	cmd.Args = exactArgs(1)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		id, err := parse(args[0])
		if err != nil {
			return err
		}
		return show(cmd, asJSON, func(ctx context.Context, b backend) (T, error) {
			return load(ctx, b, id)
		}, print)
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, jsonHelp)
	return cmd
}
