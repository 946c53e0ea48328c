package layers_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// writers names, for each table that has one, the folder (from the
// repository's top) of the one package that writes it: every INSERT,
// UPDATE and DELETE of the table is one of that package's named
// operations, which the others call.
var writers = map[string]string{
	"segments":          "pkg/segment/",
	"task_streams":      "pkg/stream/",
	"stream_batches":    "pkg/stream/",
	"tasks":             "pkg/task/",
	"dead_letters":      "pkg/internal/deadletter/",
	"tts_compensations": "pkg/compensation/",
	"task_steps":        "pkg/internal/attempt/",
	"step_parts":        "pkg/internal/attempt/",
	"task_glossaries":   "pkg/task/",
	"outbox":            "pkg/internal/outboxrow/",
}

// writeOf matches a statement that writes table (any case, any spacing).
func writeOf(table string) *regexp.Regexp {
	return regexp.MustCompile(`(?i)\b(INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+` + regexp.QuoteMeta(table) + `\b`)
}

// TestTablesHaveOneWriter: no string in a non-test Go file of the
// workspace's modules writes one of the writers' tables outside the
// package that owns it.
func TestTablesHaveOneWriter(t *testing.T) {
	t.Parallel()
	top := root(t)
	mods := modules(t, top)
	tables := slices.Sorted(maps.Keys(writers))
	patterns := make([]*regexp.Regexp, len(tables))
	for i, table := range tables {
		patterns[i] = writeOf(table)
	}
	fset := token.NewFileSet()
	found := map[string]bool{} // tables written at least once, by their owner
	for _, mod := range mods {
		err := sourceFiles(mod, mods, func(p string) error {
			rel, err := filepath.Rel(top, p)
			if err != nil {
				return err
			}
			rel = filepath.ToSlash(rel)
			f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					return true
				}
				for i, re := range patterns {
					m := re.FindString(s)
					if m == "" {
						continue
					}
					owner := writers[tables[i]]
					if strings.HasPrefix(rel, owner) {
						found[tables[i]] = true
						continue
					}
					t.Errorf("%s: %q: only %s writes %s; add a named operation there and call it",
						fset.Position(lit.Pos()), m, strings.TrimSuffix(owner, "/"), tables[i])
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, table := range tables {
		if !found[table] {
			t.Errorf("%s writes %s nowhere: is the table still written there?", strings.TrimSuffix(writers[table], "/"), table)
		}
	}
}

// TestWriteOf: the pattern finds a table's writes however they are
// spelled, and not another table's whose name starts with it.
func TestWriteOf(t *testing.T) {
	t.Parallel()
	re := writeOf("dead_letters")
	for _, s := range []string{"INSERT INTO dead_letters (", "update dead_letters set", "WITH gone AS (DELETE\n\tFROM  dead_letters WHERE"} {
		if !re.MatchString(s) {
			t.Errorf("%q: not found", s)
		}
	}
	for _, s := range []string{"INSERT INTO dead_letters_archive", "SELECT * FROM dead_letters", "FOR UPDATE", "UPDATE tasks"} {
		if re.MatchString(s) {
			t.Errorf("%q: found", s)
		}
	}
}
