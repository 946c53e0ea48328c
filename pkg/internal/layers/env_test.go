package layers_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// environReaders are the os functions that read the process environment.
var environReaders = map[string]bool{"Getenv": true, "LookupEnv": true, "Environ": true, "ExpandEnv": true}

// mayReadEnviron are the files under pkg/ that read the process
// environment, and why: the test kits find the stack a test runs on, a
// main's helper reads the environment for it, and the tools that start a
// child process hand it the environment it runs in.
var mayReadEnviron = map[string]string{
	"pkg/config/config.go":                "Environ, which only a main calls (service.Main, dubctl), reads it once",
	"pkg/media/zygote.go":                 "the zygote's child inherits the environment and LD_PRELOAD",
	"pkg/speech/apertium_pipe.go":         "the apertium child inherits the environment",
	"pkg/speech/speechtest/speechtest.go": "test kit: the speech fixtures (DUBFLOW_FIXTURES)",
}

// mayReadEnvironUnder are folders whose files may read it: the test
// environment and the local stack it starts.
var mayReadEnvironUnder = []string{"pkg/testenv/", "pkg/localstack/"}

// TestPkgReadsNoEnvironment: nothing under pkg/ reads the environment —
// configuration is read once, by a service's main, into its validated
// struct — except the files mayReadEnviron names, for their reasons.
func TestPkgReadsNoEnvironment(t *testing.T) {
	t.Parallel()
	top := root(t)
	fset := token.NewFileSet()
	err := filepath.WalkDir(filepath.Join(top, "pkg"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		rel, err := filepath.Rel(top, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if strings.Contains(rel, "/testdata/") || mayReadEnviron[rel] != "" {
			return nil
		}
		for _, dir := range mayReadEnvironUnder {
			if strings.HasPrefix(rel, dir) {
				return nil
			}
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "os" && environReaders[sel.Sel.Name] {
					t.Errorf("%s: os.%s: pkg/ reads no environment; read it in the service's config and pass the value down",
						fset.Position(sel.Pos()), sel.Sel.Name)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
