package media

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/rs/zerolog"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run with -update to create it): %v", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs from golden file (run with -update if intended)\ngot:\n%s\nwant:\n%s", name, got, want)
	}
}

// requireTools skips nothing: the tools are part of the platform, and a
// missing one fails the test with a clear message.
func requireTools(t testing.TB) {
	t.Helper()
	for _, tool := range []string{"ffmpeg", "ffprobe", "espeak-ng"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is required for media tests (apt-get install ffmpeg espeak-ng): %v", tool, err)
		}
	}
}

const sampleText = "Good morning. This is a short test of the dubbing pipeline."

var (
	samplesOnce sync.Once
	samplesDir  string
	samplesErr  error
)

// sample returns the path of a sample video of the given kind, made once per
// test binary and shared read-only by tests.
func sample(t testing.TB, kind SampleKind) string {
	t.Helper()
	requireTools(t)
	samplesOnce.Do(func() {
		samplesDir, samplesErr = os.MkdirTemp("", "media-samples-*")
	})
	if samplesErr != nil {
		t.Fatal(samplesErr)
	}
	names := map[SampleKind]string{SampleSpeech: "speech.mp4", SampleNoAudio: "noaudio.mp4", SampleSilent: "silent.mp4",
		SampleTruncatedIndex: "trunc-index.mp4", SampleTruncatedData: "trunc-data.mp4",
		SampleLongerThanClaimed: "lying.mkv"}
	path := filepath.Join(samplesDir, names[kind])
	sampleMu.Lock()
	defer sampleMu.Unlock()
	if _, err := os.Stat(path); err == nil {
		return path
	}
	if err := MakeSampleVideo(context.Background(), sampleText, path, SampleOptions{Kind: kind}); err != nil {
		t.Fatalf("make sample %s: %v", names[kind], err)
	}
	return path
}

var sampleMu sync.Mutex

func TestMain(m *testing.M) {
	flag.Parse()
	// The suite runs ffmpeg and ffprobe as the workers do: through their
	// fork servers (zygote_test.go covers running them per job).
	lib, err := buildZygoteLib()
	if err != nil {
		fmt.Fprintln(os.Stderr, "build the ffmpeg fork server:", err)
		os.Exit(1)
	}
	zygoteLibForTests = lib
	setZygoteLib(lib, zerolog.Nop())
	code := m.Run()
	setZygoteLib("", zerolog.Nop())
	if samplesDir != "" {
		os.RemoveAll(samplesDir)
	}
	os.Exit(code)
}

// wantPermanent fails unless err is permanent and mentions substr.
func wantPermanent(t *testing.T, err error, substr string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want a permanent one containing %q", substr)
	}
	if !fault.IsPermanent(err) {
		t.Errorf("error %q is not permanent", err)
	}
	if !strings.Contains(err.Error(), substr) {
		t.Errorf("error %q does not contain %q", err, substr)
	}
}

// readWAV opens path and returns its reader, closing the file at cleanup.
func readWAV(t *testing.T, path string) *WAVReader {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	r, err := NewWAVReader(f)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return r
}

func errorsIsCanceled(err error) bool { return errors.Is(err, context.Canceled) }
