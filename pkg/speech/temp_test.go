package speech_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/speech"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/pkg/worker"
)

// pathRecorder is a Transcriber that records the files it is given.
type pathRecorder struct {
	mu    sync.Mutex
	paths []string
}

func (r *pathRecorder) Transcribe(_ context.Context, wavPath, _ string) ([]speech.Segment, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.paths = append(r.paths, wavPath)
	return nil, nil
}

// The asr service's chunk files carry its temp prefix, so that its
// cleanup at start removes those a killed process left.
func TestChunkFilesCarryTheASRServiceTempPrefix(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	p := writeToneWAV(t, 30*time.Second)
	rec := &pathRecorder{}
	if _, err := (&speech.Chunker{Engine: rec, ChunkSeconds: 5, LeadSeconds: -1}).Transcribe(context.Background(), p, "en"); err != nil {
		t.Fatal(err)
	}
	if len(rec.paths) < 2 {
		t.Fatalf("%d chunks, want several", len(rec.paths))
	}
	prefix := worker.TempPrefix(wire.StepASR)
	for _, path := range rec.paths {
		if filepath.Dir(path) != tmp || !strings.HasPrefix(filepath.Base(path), prefix) {
			t.Errorf("chunk file %s is not %s/%s*", path, tmp, prefix)
		}
	}
}

// The tts service's espeak-ng takes are written in a folder with its temp
// prefix.
func TestEspeakTakesCarryTheTTSServiceTempPrefix(t *testing.T) {
	needTool(t, "espeak-ng")
	real, err := exec.LookPath("espeak-ng")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	argsFile := filepath.Join(t.TempDir(), "args")
	script := filepath.Join(t.TempDir(), "espeak")
	body := "#!/bin/sh\nprintf '%s\\n' \"$@\" >> " + argsFile + "\nexec " + real + " \"$@\"\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	e := &speech.Espeak{Command: script}
	if _, err := e.Synthesize(context.Background(), speech.SynthesisRequest{Text: "hola", Language: "es"}); err != nil {
		t.Fatal(err)
	}
	args, err := os.ReadFile(argsFile)
	if err != nil {
		t.Fatal(err)
	}
	var out string
	lines := strings.Split(string(args), "\n")
	for i, a := range lines {
		if a == "-w" && i+1 < len(lines) {
			out = lines[i+1]
		}
	}
	prefix := worker.TempPrefix(wire.StepTTS)
	if dir := filepath.Dir(out); filepath.Dir(dir) != tmp || !strings.HasPrefix(filepath.Base(dir), prefix) {
		t.Fatalf("espeak-ng wrote %q, want it in a folder %s/%s*", out, tmp, prefix)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("%d temporary entries left behind", len(left))
	}
}
