package layers_test

import (
	"bufio"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/internal/layers"
)

// project is the import path prefix of dubflow's own packages.
const project = "github.com/dubflow/dubflow/"

// graph maps each of the project's packages to the project's packages its
// non-test files import (every build tag's files together).
type graph map[string][]string

// root is the repository's top, where go.work is.
func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.work")); err != nil {
		t.Fatalf("no go.work at %s: %v", dir, err)
	}
	return dir
}

// modules reads the module folders go.work uses.
func modules(t *testing.T, top string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(top, "go.work"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var dirs []string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "use ("):
			in = true
		case in && line == ")":
			in = false
		case in && line != "":
			dirs = append(dirs, filepath.Join(top, line))
		case strings.HasPrefix(line, "use "):
			dirs = append(dirs, filepath.Join(top, strings.TrimSpace(strings.TrimPrefix(line, "use"))))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return dirs
}

// modulePath reads the module line of dir's go.mod.
func modulePath(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.TrimSpace(p)
		}
	}
	t.Fatalf("%s/go.mod names no module", dir)
	return ""
}

// load parses the imports of every non-test Go file of the workspace's
// modules.
func load(t *testing.T) graph {
	t.Helper()
	top := root(t)
	mods := modules(t, top)
	g := graph{}
	fset := token.NewFileSet()
	for _, mod := range mods {
		path := modulePath(t, mod)
		err := sourceFiles(mod, mods, func(p string) error {
			f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(mod, filepath.Dir(p))
			if err != nil {
				return err
			}
			pkg := path
			if rel != "." {
				pkg += "/" + filepath.ToSlash(rel)
			}
			if _, ok := g[pkg]; !ok {
				g[pkg] = nil
			}
			for _, imp := range f.Imports {
				ip, err := strconv.Unquote(imp.Path.Value)
				if err == nil && strings.HasPrefix(ip, project) && !slices.Contains(g[pkg], ip) {
					g[pkg] = append(g[pkg], ip)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return g
}

// longest returns the longest chain of imports starting at pkg, pkg first.
func (g graph) longest(pkg string, memo map[string][]string) []string {
	if c, ok := memo[pkg]; ok {
		return c
	}
	memo[pkg] = []string{pkg} // a cycle would not compile; this ends one anyway
	best := []string{pkg}
	for _, dep := range g[pkg] {
		if _, ok := g[dep]; !ok {
			continue
		}
		if c := g.longest(dep, memo); len(c)+1 > len(best) {
			best = append([]string{pkg}, c...)
		}
	}
	memo[pkg] = best
	return best
}

// deps returns pkg's project packages, direct and indirect, pkg excluded.
func (g graph) deps(pkg string) []string {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(p string) {
		for _, d := range g[p] {
			if !seen[d] {
				seen[d] = true
				walk(d)
			}
		}
	}
	walk(pkg)
	out := make([]string, 0, len(seen))
	for d := range seen {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

// short joins pkgs without the project's prefix, with sep.
func short(pkgs []string, sep string) string {
	out := make([]string, len(pkgs))
	for i, p := range pkgs {
		out[i] = strings.TrimPrefix(p, project)
	}
	return strings.Join(out, sep)
}

// TestImportGraphIsLow: no chain of imports among the project's packages
// is longer than layers.MaxDepth packages. A one-line import that lifts a
// package above another (a sentinel error, a constant) shows here.
func TestImportGraphIsLow(t *testing.T) {
	t.Parallel()
	g := load(t)
	if len(g) < 50 {
		t.Fatalf("found %d packages; the walk missed the workspace", len(g))
	}
	memo := map[string][]string{}
	var deepest []string
	for _, pkg := range slices.Sorted(maps.Keys(g)) {
		if c := g.longest(pkg, memo); len(c) > len(deepest) {
			deepest = c
		}
	}
	t.Logf("import graph depth %d (at most %d): %s", len(deepest), layers.MaxDepth, short(deepest, " → "))
	if len(deepest) > layers.MaxDepth {
		t.Errorf("import graph depth %d, want at most %d: %s", len(deepest), layers.MaxDepth, short(deepest, " → "))
	}
}

// Packages the runtime and the workers must not stand on.
var above = []string{project + "pkg/view", project + "pkg/admit"}

// TestWorkersDoNotStandOnTheReadModel: the step runtime (pkg/step), the
// workers' wiring (pkg/worker) and every package under pkg/ a worker uses
// — a worker is a service that runs the step runtime — import neither the
// read model (pkg/view) nor the admission rules (pkg/admit); a worker that
// checks a message by the admission rules imports pkg/admit itself.
func TestWorkersDoNotStandOnTheReadModel(t *testing.T) {
	t.Parallel()
	g := load(t)
	var workers []string
	for pkg, imps := range g {
		if strings.HasPrefix(pkg, project+"services/") && slices.Contains(imps, project+"pkg/step") {
			workers = append(workers, pkg)
		}
	}
	slices.Sort(workers)
	if len(workers) < 5 {
		t.Fatalf("found the workers %v; want at least the five of the dubbing chain", workers)
	}
	for _, base := range []string{project + "pkg/step", project + "pkg/worker"} {
		for _, d := range g.deps(base) {
			if slices.Contains(above, d) {
				t.Errorf("%s stands on %s", strings.TrimPrefix(base, project), strings.TrimPrefix(d, project))
			}
		}
	}
	used := map[string][]string{} // a package under pkg/ → the workers that use it
	for _, w := range workers {
		if slices.Contains(g[w], project+"pkg/view") {
			t.Errorf("worker %s imports pkg/view", strings.TrimPrefix(w, project))
		}
		for _, d := range g.deps(w) {
			if strings.HasPrefix(d, project+"pkg/") {
				used[d] = append(used[d], strings.TrimPrefix(w, project))
			}
		}
	}
	for _, d := range slices.Sorted(maps.Keys(used)) {
		for _, a := range above {
			if slices.Contains(g[d], a) {
				t.Errorf("%s, which %s use, imports %s", strings.TrimPrefix(d, project),
					strings.Join(used[d], ", "), strings.TrimPrefix(a, project))
			}
		}
	}
	t.Logf("workers checked: %s", short(workers, ", "))
}

// sourceFiles calls f with every non-test Go file of module mod, not
// descending into testdata, hidden or underscored folders or the other
// modules (mods) nested in it.
func sourceFiles(mod string, mods []string, f func(p string) error) error {
	return filepath.WalkDir(mod, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if p != mod && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") ||
				slices.Contains(mods, p)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		return f(p)
	})
}
