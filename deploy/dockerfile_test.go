package deploy

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction with continuation lines joined.
type instruction struct {
	line int
	cmd  string // upper case: FROM, RUN, ...
	args string
}

// stage is one build stage.
type stage struct {
	base, name string
	body       []instruction
}

// dockerfile is a parsed Dockerfile: global ARGs and stages.
type dockerfile struct {
	args   map[string]string // global ARG defaults
	stages []stage
}

// parseDockerfile reads the instructions of a Dockerfile: comments and
// parser directives are dropped, lines ending in a backslash continue.
func parseDockerfile(t *testing.T, path string) dockerfile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open Dockerfile: %v", err)
	}
	defer f.Close()
	var (
		insts []instruction
		cur   strings.Builder
		start int
	)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || (line == "" && cur.Len() == 0) {
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		if body, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(body + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		insts = append(insts, instruction{line: start, cmd: strings.ToUpper(cmd), args: strings.Join(strings.Fields(args), " ")})
		cur.Reset()
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read Dockerfile: %v", err)
	}
	df := dockerfile{args: map[string]string{}}
	for _, in := range insts {
		switch {
		case in.cmd == "FROM":
			f := strings.Fields(in.args)
			s := stage{base: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.name = f[2]
			}
			df.stages = append(df.stages, s)
		case len(df.stages) == 0 && in.cmd == "ARG":
			k, v, _ := strings.Cut(in.args, "=")
			df.args[k] = v
		case len(df.stages) == 0:
			t.Fatalf("Dockerfile line %d: %s before the first FROM", in.line, in.cmd)
		default:
			last := &df.stages[len(df.stages)-1]
			last.body = append(last.body, in)
		}
	}
	return df
}

// expand substitutes ${NAME} and $NAME with the global ARG defaults (which
// may name earlier ARGs themselves).
func (d dockerfile) expand(s string) string {
	for range 5 {
		next := os.Expand(s, func(k string) string { return d.args[k] })
		if next == s {
			break
		}
		s = next
	}
	return s
}

func (d dockerfile) stage(name string) *stage {
	for i := range d.stages {
		if d.stages[i].name == name {
			return &d.stages[i]
		}
	}
	return nil
}

func (s *stage) all(cmd string) []instruction {
	var out []instruction
	for _, in := range s.body {
		if in.cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

// mediaPackages are the Debian packages the embedded engines call.
var mediaPackages = []string{"ffmpeg", "pocketsphinx", "pocketsphinx-en-us", "apertium", "apertium-eng-spa", "apertium-eng-cat", "espeak-ng"}

// TestDockerfile checks the one image recipe: it builds the binary with
// `make build SERVICES=$SERVICE` (the command CI uses) and CGO disabled but
// for asr's loaded recogniser, on the team's Go release; both runtimes are pinned, non-root, and the media
// one carries the speech tools; RUNTIME picks one of them.
func TestDockerfile(t *testing.T) {
	df := parseDockerfile(t, "Dockerfile")

	build := df.stage("build")
	if build == nil {
		t.Fatal("Dockerfile: no stage named build")
	}
	if !strings.HasPrefix(df.expand(build.base), "golang:") {
		t.Errorf("build stage: base %s is not the golang image", df.expand(build.base))
	}
	if want := strings.TrimPrefix(runtime.Version(), "go"); df.args["GO_VERSION"] != want {
		t.Errorf("Dockerfile GO_VERSION=%q, but the team's toolchain is %s", df.args["GO_VERSION"], want)
	}
	makeBuild := regexp.MustCompile(`(^|[;&|]\s*)make build SERVICES=\$\{?SERVICE\}?(\s|$)`)
	runs := 0
	for _, in := range build.all("RUN") {
		if makeBuild.MatchString(in.args) {
			runs++
		}
		if strings.Contains(in.args, "go build") {
			t.Errorf("Dockerfile line %d: calls go build directly; the image must build with `make build`", in.line)
		}
	}
	if runs != 1 {
		t.Errorf("build stage: %d RUN instructions call `make build SERVICES=${SERVICE}`, want exactly 1", runs)
	}
	env := strings.Join(instructionArgs(build.all("ENV")), " ")
	for _, want := range []string{"CGO_ENABLED=0", "GOTOOLCHAIN=local"} {
		if !strings.Contains(env, want) {
			t.Errorf("build stage: ENV does not set %s", want)
		}
	}
	if !slices.ContainsFunc(build.all("ARG"), func(in instruction) bool { return in.args == "SERVICE" }) {
		t.Error("build stage: no ARG SERVICE")
	}
	// asr alone is built with cgo, against Debian's libpocketsphinx, unless
	// PS_LIB=0; the build checks that the binary took the tag.
	if !slices.ContainsFunc(build.all("ARG"), func(in instruction) bool { return in.args == "PS_LIB=1" }) {
		t.Error("build stage: no ARG PS_LIB=1 (asr's loaded recogniser by default)")
	}
	script := strings.Join(instructionArgs(build.all("RUN")), " ")
	for _, want := range []string{`"${SERVICE}" = asr`, "libpocketsphinx-dev", "libsphinxbase-dev", "export CGO_ENABLED=1",
		"PS_LIB=$ps_lib", "tags=pocketsphinx_lib"} {
		if !strings.Contains(script, want) {
			t.Errorf("build stage: RUN does not contain %q (asr's cgo build)", want)
		}
	}

	for _, name := range []string{"static", "media"} {
		s := df.stage(name)
		if s == nil {
			t.Errorf("Dockerfile: no stage named %s", name)
			continue
		}
		checkImage(t, "stage "+name, df.expand(s.base))
		users := s.all("USER")
		if len(users) == 0 {
			t.Errorf("stage %s: no USER, the image would run as root", name)
		} else if u := users[len(users)-1].args; strings.HasPrefix(u, "0") || strings.HasPrefix(u, "root") {
			t.Errorf("stage %s: USER %s is root", name, u)
		}
		if eps := s.all("ENTRYPOINT"); len(eps) != 1 || !strings.HasPrefix(eps[0].args, "[") {
			t.Errorf("stage %s: want one ENTRYPOINT in exec form", name)
		}
		copies := strings.Join(instructionArgs(s.all("COPY")), "\n")
		if !strings.Contains(copies, "--from=build") {
			t.Errorf("stage %s: does not copy the binary from the build stage", name)
		}
	}
	if media := df.stage("media"); media != nil {
		installs := strings.Join(instructionArgs(media.all("RUN")), " ")
		for _, pkg := range mediaPackages {
			if !slices.Contains(strings.Fields(installs), pkg) {
				t.Errorf("media stage: package %s is not installed", pkg)
			}
		}
		if !strings.Contains(installs, "--no-install-recommends") || !strings.Contains(installs, "rm -rf /var/lib/apt/lists") {
			t.Error("media stage: apt-get without --no-install-recommends or without cleaning its lists")
		}
	}

	final := df.stages[len(df.stages)-1]
	if final.base != "${RUNTIME}" {
		t.Errorf("last stage FROM %s, want FROM ${RUNTIME}", final.base)
	}
	for _, svc := range services {
		if df.stage(svc.runtime) == nil {
			t.Errorf("service %s: runtime %q is not a stage", svc.name, svc.runtime)
		}
	}
	if df.stage(df.args["RUNTIME"]) == nil {
		t.Errorf("default RUNTIME=%q is not a stage", df.args["RUNTIME"])
	}
}

// TestMakeBuildBuildsOneService checks the other side of the contract: the
// Makefile's build target takes SERVICES and writes bin/<service>.
func TestMakeBuildBuildsOneService(t *testing.T) {
	root := repoRoot(t)
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("make is not installed: %v", err)
	}
	for _, svc := range []string{"asr", "dispatcher"} {
		cmd := exec.Command("make", "-n", "build", "SERVICES="+svc)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make -n build SERVICES=%s: %v\n%s", svc, err, out)
		}
		if !regexp.MustCompile(`go build .*-o bin/\S* .*\./services/` + svc + `(\s|$)`).Match(out) {
			t.Errorf("make -n build SERVICES=%s does not build ./services/%s into bin/:\n%s", svc, svc, out)
		}
		for _, other := range services {
			if other.name != svc && strings.Contains(string(out), "./services/"+other.name+" ") {
				t.Errorf("make build SERVICES=%s also builds %s", svc, other.name)
			}
		}
	}
}

// TestDockerignore: the build context leaves out what `make build` does not
// need (and what must never reach an image), but keeps what it does.
func TestDockerignore(t *testing.T) {
	root := repoRoot(t)
	raw, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatalf("read .dockerignore: %v", err)
	}
	var patterns []string
	for _, l := range strings.Split(string(raw), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			patterns = append(patterns, l)
		}
	}
	for _, must := range []string{".git", ".devstack", ".tools", "bin"} {
		if !slices.Contains(patterns, must) {
			t.Errorf(".dockerignore does not exclude %s", must)
		}
	}
	for _, keep := range []string{"go.work", "go.work.sum", "Makefile", "pkg", "services", "proto", "migrations", "deploy/go.mod", "deploy"} {
		for _, p := range patterns {
			if ok, _ := filepath.Match(p, keep); ok && !strings.HasPrefix(p, "!") {
				t.Errorf(".dockerignore pattern %q excludes %s, which `make build` needs", p, keep)
			}
		}
	}
}

// TestLongRunningServicesMatchTheStackScript: the local stack's list of
// long-running services (scripts/services.txt) is the set of Deployments.
func TestLongRunningServicesMatchTheStackScript(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "scripts", "services.txt"))
	if err != nil {
		t.Fatalf("read scripts/services.txt: %v", err)
	}
	var stack, deployed []string
	for _, l := range strings.Split(string(raw), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			stack = append(stack, l)
		}
	}
	for _, s := range services {
		if s.kind == "Deployment" {
			deployed = append(deployed, s.name)
		}
	}
	slices.Sort(stack)
	slices.Sort(deployed)
	if !slices.Equal(stack, deployed) {
		t.Errorf("scripts/services.txt runs %v, the Kubernetes Deployments are %v", stack, deployed)
	}
}

func instructionArgs(ins []instruction) []string {
	out := make([]string, len(ins))
	for i, in := range ins {
		out[i] = in.args
	}
	return out
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
}
