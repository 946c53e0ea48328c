package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
)

// service is one deployable of dubflow as the deployment files must know it.
type service struct {
	name    string // binary bin/<name>, module services/<name>, image dubflow/<name>
	object  string // Kubernetes object name ("" when not deployed on Kubernetes)
	kind    string // Deployment, Job, CronJob, or "" for a tool
	runtime string // final image stage: "media" or "static"
	queue   string // the queue it consumes, "" for none
	timeout string // its step timeout variable, "" for none
}

// services lists every deployable. A new service under services/ must be
// added here (TestEveryServiceIsDeployed), which makes the tests below ask
// for its image, its Kubernetes objects and its compose entry.
var services = []service{
	{name: "extract_audio", object: "extract-audio", kind: "Deployment", runtime: "media", queue: "task.extract_audio", timeout: "TIMEOUT_EXTRACT_AUDIO_SECONDS"},
	{name: "asr", object: "asr", kind: "Deployment", runtime: "media", queue: "task.asr", timeout: "TIMEOUT_ASR_SECONDS"},
	{name: "translate", object: "translate", kind: "Deployment", runtime: "media", queue: "task.translate", timeout: "TIMEOUT_TRANSLATE_SECONDS"},
	{name: "tts", object: "tts", kind: "Deployment", runtime: "media", queue: "task.tts", timeout: "TIMEOUT_TTS_SECONDS"},
	{name: "mux_video", object: "mux-video", kind: "Deployment", runtime: "media", queue: "task.mux_video", timeout: "TIMEOUT_MUX_SECONDS"},
	{name: "dispatcher", object: "dispatcher", kind: "Deployment", runtime: "static", queue: "task.waiting_queue"},
	{name: "dlq_recorder", object: "dlq-recorder", kind: "Deployment", runtime: "static", queue: "task.dlq"},
	{name: "reconciler", object: "reconciler", kind: "Deployment", runtime: "static"},
	{name: "migrate", object: "migrate", kind: "Job", runtime: "static"},
	{name: "tts_requeue", object: "tts-requeue", kind: "CronJob", runtime: "static"},
	{name: "console", object: "console", kind: "Deployment", runtime: "media"},
	{name: "dubctl", runtime: "static"},
}

// devTools are programs under services/ that are never deployed: they run
// beside a checkout (`make chaos` runs the real services on a private
// stack and breaks it on purpose).
var devTools = []string{"chaos"}

func serviceByObject(kind, object string) (service, bool) {
	for _, s := range services {
		if s.kind == kind && s.object == object {
			return s, true
		}
	}
	return service{}, false
}

// repoRoot is the repository root: the parent of this module.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatalf("repository root: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.work")); err != nil {
		t.Fatalf("repository root %s has no go.work: %v", root, err)
	}
	return root
}

// TestEveryServiceIsDeployed fails when services/ holds a deployable the
// deployment files do not know about: a folder with a main package, the
// same rule `make build` uses to find services.
func TestEveryServiceIsDeployed(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join(repoRoot(t), "services"))
	if err != nil {
		t.Fatalf("list services: %v", err)
	}
	known := make([]string, 0, len(services))
	for _, s := range services {
		known = append(known, s.name)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if !hasMainPackage(t, filepath.Join(repoRoot(t), "services", e.Name())) {
			continue
		}
		if !slices.Contains(known, e.Name()) && !slices.Contains(devTools, e.Name()) {
			t.Errorf("services/%s is not in the deploy tests' services table: add its image, manifests and compose entry", e.Name())
		}
	}
}

// hasMainPackage reports whether a folder has a Go file of package main.
func hasMainPackage(t *testing.T, dir string) bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatalf("list %s: %v", dir, err)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("read %s: %v", f, err)
		}
		if regexp.MustCompile(`(?m)^package main$`).Match(raw) {
			return true
		}
	}
	return false
}
