package deploy

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/distribution/reference"
)

const composeFile = "compose.yaml"

// composeStack are the engines the compose file runs beside dubflow.
var composeStack = []string{"rabbitmq", "postgres", "minio"}

// loadCompose loads compose.yaml with the compose specification's own
// loader: schema validation (unknown keys fail), interpolation, merging of
// the YAML anchors, every profile enabled.
func loadCompose(t *testing.T) *types.Project {
	t.Helper()
	opts, err := cli.NewProjectOptions([]string{composeFile},
		cli.WithWorkingDirectory("."),
		cli.WithEnv(nil),
		cli.WithInterpolation(true),
		cli.WithProfiles([]string{"*"}),
	)
	if err != nil {
		t.Fatalf("compose options: %v", err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("load %s: %v", composeFile, err)
	}
	return p
}

// TestComposeNamesEveryService loads the compose file and checks it runs
// the stack and every dubflow service, built by deploy/Dockerfile with the
// right runtime, hardened like the Kubernetes pods.
func TestComposeNamesEveryService(t *testing.T) {
	p := loadCompose(t)
	root := repoRoot(t)
	for _, name := range composeStack {
		s, ok := p.Services[name]
		if !ok {
			t.Errorf("compose: service %s is missing", name)
			continue
		}
		checkImage(t, "compose service "+name, s.Image)
		if s.HealthCheck == nil || len(s.HealthCheck.Test) == 0 {
			t.Errorf("compose service %s: no healthcheck (the migrate service waits for it)", name)
		}
	}
	for _, svc := range services {
		s, ok := p.Services[svc.name]
		if !ok {
			t.Errorf("compose: service %s is missing", svc.name)
			continue
		}
		id := "compose service " + svc.name
		checkImage(t, id, s.Image)
		if named, err := reference.ParseNormalizedNamed(s.Image); err != nil || !strings.HasSuffix(reference.Path(named), "dubflow/"+svc.name) {
			t.Errorf("%s: image %s is not dubflow/%s", id, s.Image, svc.name)
		}
		if s.Build == nil {
			t.Errorf("%s: no build section", id)
		} else {
			if filepath.Clean(s.Build.Context) != root {
				t.Errorf("%s: build context %s, want the repository root %s", id, s.Build.Context, root)
			}
			if s.Build.Dockerfile != "deploy/Dockerfile" {
				t.Errorf("%s: dockerfile %s, want deploy/Dockerfile", id, s.Build.Dockerfile)
			}
			if got := argValue(s.Build.Args, "SERVICE"); got != svc.name {
				t.Errorf("%s: build arg SERVICE=%q, want %q", id, got, svc.name)
			}
			if got := argValue(s.Build.Args, "RUNTIME"); got != svc.runtime {
				t.Errorf("%s: build arg RUNTIME=%q, want %q", id, got, svc.runtime)
			}
		}
		if s.User != "65532:65532" || !s.ReadOnly || !slices.Contains(s.CapDrop, "ALL") {
			t.Errorf("%s: want user 65532:65532, read_only and cap_drop ALL; got %q, %v, %v", id, s.User, s.ReadOnly, s.CapDrop)
		}
		tmp := envValue(s.Environment, "TMPDIR")
		// The root filesystem is read-only: scratch is a tmpfs the non-root user can write.
		if !slices.ContainsFunc(s.Volumes, func(v types.ServiceVolumeConfig) bool {
			return v.Type == types.VolumeTypeTmpfs && v.Target == tmp && v.Tmpfs != nil && v.Tmpfs.Mode == 0o1777
		}) {
			t.Errorf("%s: TMPDIR %q is not a tmpfs mount with mode 1777", id, tmp)
		}
		for _, v := range credentialVars {
			if envValue(s.Environment, v) == "" {
				t.Errorf("%s: %s is not set", id, v)
			}
		}
		if svc.name != "migrate" {
			if dep, ok := s.DependsOn["migrate"]; !ok || dep.Condition != types.ServiceConditionCompletedSuccessfully {
				t.Errorf("%s: does not wait for migrate to complete successfully", id)
			}
		}
		if svc.timeout != "" {
			timeout, err := strconv.Atoi(envValue(s.Environment, svc.timeout))
			if err != nil {
				t.Errorf("%s: %s: %v", id, svc.timeout, err)
			}
			if s.StopGracePeriod == nil || time.Duration(*s.StopGracePeriod) <= time.Duration(timeout)*time.Second {
				t.Errorf("%s: stop_grace_period is not longer than %s=%d s", id, svc.timeout, timeout)
			}
			shutdown, err := strconv.Atoi(envValue(s.Environment, "SHUTDOWN_GRACE_SECONDS"))
			if err != nil || shutdown < timeout || s.StopGracePeriod == nil ||
				time.Duration(shutdown)*time.Second >= time.Duration(*s.StopGracePeriod) {
				t.Errorf("%s: SHUTDOWN_GRACE_SECONDS=%d must lie between %s=%d s and stop_grace_period", id, shutdown, svc.timeout, timeout)
			}
		}
	}
	for name := range p.Services {
		if !slices.Contains(composeStack, name) && !slices.ContainsFunc(services, func(s service) bool { return s.name == name }) {
			t.Errorf("compose service %s is neither the stack nor a dubflow service", name)
		}
	}
	for name := range p.DisabledServices {
		t.Errorf("compose service %s stayed disabled with every profile enabled", name)
	}
}

// TestComposeRejectsUnknownKeys shows the loader bites.
func TestComposeRejectsUnknownKeys(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "compose.yaml")
	writeFile(t, bad, "services:\n  asr:\n    image: dubflow/asr:1\n    stop_grace: 10s\n")
	opts, err := cli.NewProjectOptions([]string{bad}, cli.WithName("bad"), cli.WithWorkingDirectory(dir), cli.WithEnv(nil))
	if err != nil {
		t.Fatalf("compose options: %v", err)
	}
	if _, err := opts.LoadProject(context.Background()); err == nil {
		t.Fatal("the compose loader accepted the unknown key stop_grace")
	}
}

// TestDockerComposeConfig runs `docker compose config` where the compose
// plugin is installed. Without it the loader test above stands alone.
func TestDockerComposeConfig(t *testing.T) {
	if err := exec.Command("docker", "compose", "version").Run(); err != nil {
		t.Skipf("docker compose is not installed (%v); the compose-go loader test covers the file", err)
	}
	out, err := exec.Command("docker", "compose", "-f", composeFile, "--profile", "*", "config", "--services").CombinedOutput()
	if err != nil {
		t.Fatalf("docker compose config: %v\n%s", err, out)
	}
	got := strings.Fields(string(out))
	for _, s := range services {
		if !slices.Contains(got, s.name) {
			t.Errorf("docker compose config does not list %s: %v", s.name, got)
		}
	}
}

func argValue(args types.MappingWithEquals, key string) string {
	if v, ok := args[key]; ok && v != nil {
		return *v
	}
	return ""
}

func envValue(env types.MappingWithEquals, key string) string {
	return argValue(env, key)
}
