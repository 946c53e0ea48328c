package deploy

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The deployment files must agree with the code: these helpers read the
// configuration the code really has — the env tags and envDefault values of
// the config structs, the broker's queue names, the step timeout margin —
// from the Go sources themselves, so nothing here is a copied list.

// codeVar is one environment variable a service's configuration reads.
type codeVar struct {
	def    string // envDefault, "" when none
	hasDef bool
}

// goPackage is the parsed non-test Go files of one folder.
type goPackage struct {
	structs map[string]*ast.StructType
	consts  map[string]ast.Expr
	source  string // every file's text, joined
}

func parseGoPackage(t *testing.T, dir string) goPackage {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatalf("list %s: %v", dir, err)
	}
	p := goPackage{structs: map[string]*ast.StructType{}, consts: map[string]ast.Expr{}}
	fset := token.NewFileSet()
	var src strings.Builder
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("read %s: %v", f, err)
		}
		src.Write(raw)
		file, err := parser.ParseFile(fset, f, raw, 0)
		if err != nil {
			t.Fatalf("parse %s: %v", f, err)
		}
		for _, decl := range file.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, spec := range gd.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if st, ok := s.Type.(*ast.StructType); ok {
						p.structs[s.Name.Name] = st
					}
				case *ast.ValueSpec:
					if gd.Tok == token.CONST {
						for i, n := range s.Names {
							if i < len(s.Values) {
								p.consts[n.Name] = s.Values[i]
							}
						}
					}
				}
			}
		}
	}
	p.source = src.String()
	return p
}

// codeConfig is what the code says about configuration.
type codeConfig struct {
	common goPackage
	// vars: service → variable → default.
	vars map[string]map[string]codeVar
}

func loadCodeConfig(t *testing.T) *codeConfig {
	t.Helper()
	root := repoRoot(t)
	c := &codeConfig{common: parseGoPackage(t, filepath.Join(root, "pkg", "config")), vars: map[string]map[string]codeVar{}}
	for _, s := range services {
		dir := filepath.Join(root, "services", s.name)
		pkg := parseGoPackage(t, dir)
		vars := map[string]codeVar{}
		for _, st := range pkg.structs {
			c.collect(t, st, pkg, vars)
		}
		// A service that keeps its settings in a room of its own
		// (services/dubctl/internal/database).
		if len(vars) == 0 {
			rooms, err := filepath.Glob(filepath.Join(dir, "internal", "*"))
			if err != nil {
				t.Fatal(err)
			}
			for _, room := range rooms {
				rp := parseGoPackage(t, room)
				for _, st := range rp.structs {
					c.collect(t, st, rp, vars)
				}
				pkg.source += rp.source
			}
		}
		// A service that loads config.Common without a struct of its own.
		if strings.Contains(pkg.source, "config.Common") {
			c.collect(t, c.common.structs["Common"], c.common, vars)
		}
		if len(vars) == 0 {
			t.Fatalf("services/%s: no configuration found in its sources", s.name)
		}
		c.vars[s.name] = vars
	}
	return c
}

// collect adds the env-tagged fields of st to vars, following nested and
// embedded structs of pkg and of pkg/config.
func (c *codeConfig) collect(t *testing.T, st *ast.StructType, pkg goPackage, vars map[string]codeVar) {
	c.collectPrefixed(t, st, pkg, vars, "")
}

// collectPrefixed is collect for a struct read under an envPrefix (a
// field such as config.Engine, whose own env tag is read too).
func (c *codeConfig) collectPrefixed(t *testing.T, st *ast.StructType, pkg goPackage, vars map[string]codeVar, prefix string) {
	for _, f := range st.Fields.List {
		var tag reflect.StructTag
		if f.Tag != nil {
			raw, err := strconv.Unquote(f.Tag.Value)
			if err != nil {
				t.Fatalf("struct tag %s: %v", f.Tag.Value, err)
			}
			tag = reflect.StructTag(raw)
		}
		if name, _, _ := strings.Cut(tag.Get("env"), ","); name != "" {
			def, has := tag.Lookup("envDefault")
			vars[prefix+name] = codeVar{def: def, hasDef: has}
			if _, ok := tag.Lookup("envPrefix"); !ok {
				continue
			}
		}
		inner := prefix + tag.Get("envPrefix")
		switch typ := f.Type.(type) {
		case *ast.Ident:
			if nested, ok := pkg.structs[typ.Name]; ok {
				c.collectPrefixed(t, nested, pkg, vars, inner)
			}
		case *ast.SelectorExpr:
			if x, ok := typ.X.(*ast.Ident); ok && x.Name == "config" {
				if nested, ok := c.common.structs[typ.Sel.Name]; ok {
					c.collectPrefixed(t, nested, c.common, vars, inner)
				}
			}
		}
	}
}

// readBy returns the services whose configuration reads name.
func (c *codeConfig) readBy(name string) []string {
	var out []string
	for svc, vars := range c.vars {
		if _, ok := vars[name]; ok {
			out = append(out, svc)
		}
	}
	slices.Sort(out)
	return out
}

// def returns the code's default of name for svc.
func (c *codeConfig) def(svc, name string) (string, bool) {
	v, ok := c.vars[svc][name]
	return v.def, ok && v.hasDef
}

// durationConst evaluates a constant of pkg/config written as
// `N * time.Second` or `N * time.Minute`.
func (c *codeConfig) durationConst(t *testing.T, name string) time.Duration {
	t.Helper()
	e, ok := c.common.consts[name].(*ast.BinaryExpr)
	if !ok || e.Op != token.MUL {
		t.Fatalf("pkg/config: const %s is not N * time.Unit", name)
	}
	lit, ok1 := e.X.(*ast.BasicLit)
	unit, ok2 := e.Y.(*ast.SelectorExpr)
	if !ok1 || !ok2 {
		t.Fatalf("pkg/config: const %s is not N * time.Unit", name)
	}
	n, err := strconv.Atoi(lit.Value)
	if err != nil {
		t.Fatalf("pkg/config: const %s: %v", name, err)
	}
	units := map[string]time.Duration{"Second": time.Second, "Minute": time.Minute}
	u, ok := units[unit.Sel.Name]
	if !ok {
		t.Fatalf("pkg/config: const %s: unknown unit %s", name, unit.Sel.Name)
	}
	return time.Duration(n) * u
}

// wireConsts returns the string constants of pkg/wire, the one place that
// names the queues; a constant may be built from others with +.
func wireConsts(t *testing.T) map[string]string {
	t.Helper()
	pkg := parseGoPackage(t, filepath.Join(repoRoot(t), "pkg", "wire"))
	out := map[string]string{}
	for name := range pkg.consts {
		if v, ok := stringConst(pkg.consts, name, 0); ok {
			out[name] = v
		}
	}
	return out
}

// stringConst evaluates the string constant name: a literal, another
// constant, or a sum of those.
func stringConst(consts map[string]ast.Expr, name string, depth int) (string, bool) {
	e, ok := consts[name]
	if !ok || depth > 10 {
		return "", false
	}
	var eval func(ast.Expr) (string, bool)
	eval = func(e ast.Expr) (string, bool) {
		switch x := e.(type) {
		case *ast.BasicLit:
			if x.Kind != token.STRING {
				return "", false
			}
			v, err := strconv.Unquote(x.Value)
			return v, err == nil
		case *ast.Ident:
			return stringConst(consts, x.Name, depth+1)
		case *ast.ParenExpr:
			return eval(x.X)
		case *ast.BinaryExpr:
			if x.Op != token.ADD {
				return "", false
			}
			a, ok1 := eval(x.X)
			b, ok2 := eval(x.Y)
			return a + b, ok1 && ok2
		}
		return "", false
	}
	return eval(e)
}

// readEnvFile reads a Kustomize env file: NAME=value lines, # comments.
func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Errorf("%s: line %q is not NAME=value", path, line)
			continue
		}
		out[k] = v
	}
	return out
}

// deploymentChoices are the ConfigMap values that differ from the code's
// defaults on purpose, each with its reason. Everything else in the base
// ConfigMap must equal the default of every service that reads it.
var deploymentChoices = map[string]string{
	"S3_ENDPOINT": "the object store's in-cluster address, not the developer's localhost",
	"OPS_ADDR":    "probes and Prometheus reach the pod's address; the code's default is loopback only",
}

// osVars are container variables no dubflow configuration struct reads.
var osVars = []string{"TMPDIR"}

// TestConfigMapAgreesWithTheCode: every name in the base ConfigMap is read by
// some service, and its value is the code's default for every service that
// reads it (unless it is a documented deployment choice) — so the manifests
// and the code cannot drift apart silently.
func TestConfigMapAgreesWithTheCode(t *testing.T) {
	code := loadCodeConfig(t)
	env := readEnvFile(t, filepath.Join("k8s", "base", "config.env"))
	for name, value := range env {
		readers := code.readBy(name)
		if len(readers) == 0 {
			t.Errorf("config.env sets %s, which no service's configuration reads (a typo, or a setting the code dropped)", name)
			continue
		}
		if _, ok := deploymentChoices[name]; ok {
			continue
		}
		for _, svc := range readers {
			if def, ok := code.def(svc, name); ok && !sameValue(def, value) {
				t.Errorf("config.env %s=%s, but services/%s defaults to %s: make them agree (or document a deployment choice)",
					name, value, svc, def)
			}
		}
	}
	for name := range deploymentChoices {
		if _, ok := env[name]; !ok {
			t.Errorf("deploymentChoices names %s, which config.env does not set", name)
		}
	}
	// The settings the deployment's rules rest on are spelled out, not left
	// to defaults nobody sees.
	for _, s := range services {
		if s.timeout != "" {
			if _, ok := env[s.timeout]; !ok {
				t.Errorf("config.env does not set %s", s.timeout)
			}
		}
	}
	for _, name := range []string{"BROKER_CONSUMER_TIMEOUT_SECONDS", "OPS_ADDR", "STEP_MAX_RETRIES"} {
		if _, ok := env[name]; !ok {
			t.Errorf("config.env does not set %s", name)
		}
	}
}

// sameValue compares two settings as numbers when both are numbers.
func sameValue(a, b string) bool {
	if a == b {
		return true
	}
	x, err1 := strconv.ParseFloat(a, 64)
	y, err2 := strconv.ParseFloat(b, 64)
	return err1 == nil && err2 == nil && x == y
}

// TestServicesTableAgreesWithTheCode: the services table's queue and timeout
// variable of each service are the code's own.
func TestServicesTableAgreesWithTheCode(t *testing.T) {
	code := loadCodeConfig(t)
	queues := map[string]bool{}
	for _, v := range wireConsts(t) {
		if strings.HasPrefix(v, "task.") {
			queues[v] = true
		}
	}
	for _, s := range services {
		if s.queue != "" && !queues[s.queue] {
			t.Errorf("service %s: queue %s is not a queue constant of pkg/wire", s.name, s.queue)
		}
		if s.timeout != "" {
			if _, ok := code.def(s.name, s.timeout); !ok {
				t.Errorf("service %s: its configuration has no %s with a default", s.name, s.timeout)
			}
		}
	}
}

// TestContainerEnvIsReadByTheService: every variable a manifest sets on a
// container is one its service reads (or one of osVars).
func TestContainerEnvIsReadByTheService(t *testing.T) {
	code := loadCodeConfig(t)
	for _, overlay := range overlays {
		r := render(t, overlay)
		check := func(kind, object string, names []string) {
			svc, ok := serviceByObject(kind, object)
			if !ok {
				return
			}
			for _, n := range names {
				if _, ok := code.vars[svc.name][n]; !ok && !slices.Contains(osVars, n) {
					t.Errorf("%s: %s/%s sets %s, which services/%s does not read", overlay, kind, object, n, svc.name)
				}
			}
		}
		for _, d := range r.deployments {
			for _, c := range d.Spec.Template.Spec.Containers {
				var names []string
				for _, e := range c.Env {
					names = append(names, e.Name)
				}
				check("Deployment", d.Name, names)
			}
		}
		// Every ConfigMap key, overlays' additions included, is read by someone.
		if cm := r.configMap(configName); cm != nil {
			for k := range cm.Data {
				if len(code.readBy(k)) == 0 {
					t.Errorf("%s: ConfigMap %s sets %s, which no service reads", overlay, configName, k)
				}
			}
		}
	}
}

// stepTimeoutLimit is the longest step timeout the code accepts against a
// broker consumer timeout of brokerSeconds (config.Common.CheckStepTimeout).
func stepTimeoutLimit(t *testing.T, code *codeConfig, brokerSeconds int64) int64 {
	return brokerSeconds - int64(code.durationConst(t, "StepTimeoutMargin")/time.Second)
}

// TestREADMEStatesTheCodesTimeouts: deploy/README.md's table of step
// timeouts gives each worker's code default, and the broker consumer
// timeout and margin the code assumes.
func TestREADMEStatesTheCodesTimeouts(t *testing.T) {
	code := loadCodeConfig(t)
	raw, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	row := func(name, value string) *regexp.Regexp {
		return regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(name) + "` \\| " + regexp.QuoteMeta(value) + " s? ?\\|")
	}
	for _, s := range services {
		if s.timeout == "" {
			continue
		}
		def, _ := code.def(s.name, s.timeout)
		if !row(s.timeout, def).MatchString(readme) {
			t.Errorf("deploy/README.md has no row | `%s` | %s | (the code's default)", s.timeout, def)
		}
	}
	broker, _ := code.def("asr", "BROKER_CONSUMER_TIMEOUT_SECONDS")
	if !row("BROKER_CONSUMER_TIMEOUT_SECONDS", broker).MatchString(readme) {
		t.Errorf("deploy/README.md has no row | `BROKER_CONSUMER_TIMEOUT_SECONDS` | %s |", broker)
	}
	margin := int64(code.durationConst(t, "StepTimeoutMargin") / time.Second)
	if !strings.Contains(readme, strconv.FormatInt(margin, 10)+" s below") {
		t.Errorf("deploy/README.md does not state the %d s margin below the consumer timeout", margin)
	}
}

// TestComposeEnvAgreesWithTheCode: every variable compose.yaml gives a
// dubflow service (they share one block, like the ConfigMap) is one some
// service reads (or one of osVars), and each step timeout is the code's
// default.
func TestComposeEnvAgreesWithTheCode(t *testing.T) {
	code := loadCodeConfig(t)
	p := loadCompose(t)
	for _, svc := range services {
		s, ok := p.Services[svc.name]
		if !ok {
			continue // reported by TestComposeNamesEveryService
		}
		for name := range s.Environment {
			if len(code.readBy(name)) == 0 && !slices.Contains(osVars, name) {
				t.Errorf("compose service %s: sets %s, which no service reads", svc.name, name)
			}
		}
		if svc.timeout != "" {
			def, _ := code.def(svc.name, svc.timeout)
			if got := envValue(s.Environment, svc.timeout); !sameValue(got, def) {
				t.Errorf("compose service %s: %s=%s, but the code's default is %s", svc.name, svc.timeout, got, def)
			}
		}
	}
}
