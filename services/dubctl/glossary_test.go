package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
)

// TestSubmitGlossary: --glossary FILE.csv puts the terms in the published
// extract_audio payload; a broken file is a usage error and nothing is
// created.
func TestSubmitGlossary(t *testing.T) {
	e := setup(t)
	video := sample(t, media.SampleSpeech)
	csv := filepath.Join(t.TempDir(), "terms.csv")
	if err := os.WriteFile(csv, []byte("source,target\nweather,clima\n# kept as it is\ndubflow,\n\"New York\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := run(t, "submit", "--input", video, "--glossary", csv)
	if code != 0 {
		t.Fatalf("submit: exit %d: %s", code, stderr)
	}
	env := e.submitted(t)
	if env.TaskID.String() != strings.TrimSpace(stdout) {
		t.Fatalf("published message of task %s, submit printed %q", env.TaskID, stdout)
	}
	var p wire.ExtractAudio
	if err := json.Unmarshal(env.Payload, &p); err != nil {
		t.Fatal(err)
	}
	want := []wire.Term{{Source: "weather", Target: "clima"}, {Source: "dubflow"}, {Source: "New York"}}
	if !reflect.DeepEqual(p.Glossary, want) {
		t.Errorf("glossary %+v, want %+v", p.Glossary, want)
	}

	bad := filepath.Join(t.TempDir(), "bad.csv")
	if err := os.WriteFile(bad, []byte("a,b,c\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = run(t, "submit", "--input", video, "--glossary", bad)
	var tasks int
	if err := e.db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM tasks`).Scan(&tasks); err != nil {
		t.Fatal(err)
	}
	if code != cli.ExitUsage || !strings.Contains(stderr, "line 1") || tasks != 1 {
		t.Errorf("bad glossary: exit %d, %d tasks: %s", code, tasks, stderr)
	}
}
