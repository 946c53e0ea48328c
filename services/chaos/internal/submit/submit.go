package submit

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/services/chaos/internal/procs"
	"github.com/dubflow/dubflow/services/chaos/internal/stack"
	"github.com/google/uuid"
)

// FixtureFiles are the speech recordings clips are cut from, with their
// lengths in seconds.
var FixtureFiles = []string{"jfk.wav", "two_cities.wav"}

var fixtureSeconds = map[string]float64{"jfk.wav": 11.0, "two_cities.wav": 44.3}

// Clip is a short video made from a stretch of real speech.
type Clip struct {
	path          string
	from          string
	start, length float64
}

// clipCount is how many different clips the tasks share.
const clipCount = 12

// MakeClips cuts clipCount stretches of 3 to 5 seconds of speech at
// random places of the fixtures and makes each a small video (a still
// colour picture, H.264 and AAC) in dir.
func MakeClips(ctx context.Context, rng *rand.Rand, fixtures, dir string) ([]Clip, error) {
	var clips []Clip
	for i := range clipCount {
		from := FixtureFiles[rng.IntN(len(FixtureFiles))]
		length := 3 + 2*rng.Float64()
		start := rng.Float64() * max(0, fixtureSeconds[from]-length)
		c := Clip{path: filepath.Join(dir, fmt.Sprintf("clip%02d.mp4", i)), from: from, start: start, length: length}
		cmd := exec.CommandContext(ctx, "ffmpeg", "-nostdin", "-y", "-v", "error",
			"-f", "lavfi", "-i", fmt.Sprintf("color=c=0x%06x:s=160x90:r=10", rng.IntN(1<<24)),
			"-ss", fmt.Sprintf("%.2f", start), "-t", fmt.Sprintf("%.2f", length), "-i", filepath.Join(fixtures, from),
			"-map", "0:v", "-map", "1:a", "-t", fmt.Sprintf("%.2f", length),
			"-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", "-c:a", "aac", "-b:a", "64k",
			"-shortest", c.path)
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("make clip %s from %s: %w\n%s", c.path, from, err, out)
		}
		if _, err := media.ProbeInput(ctx, c.path, media.Limits{RequireAudio: true, RequireVideo: true}); err != nil {
			return nil, fmt.Errorf("made clip %s: %w", c.path, err)
		}
		clips = append(clips, c)
	}
	return clips, nil
}

// Submitter runs `dubctl submit` against the private stack.
type Submitter struct {
	Dubctl string
	Env    []string
	// Spread, when set, gives the i-th submission the broker's nodes
	// starting at the i-th (AMQP_URL rotated), as clients behind a load
	// balancer spread over a cluster.
	Spread bool
}

// environ is the i-th submission's environment.
func (s *Submitter) environ(i int) []string {
	if !s.Spread {
		return s.Env
	}
	out := make([]string, len(s.Env))
	for j, kv := range s.Env {
		if v, ok := strings.CutPrefix(kv, "AMQP_URL="); ok {
			kv = "AMQP_URL=" + procs.Rotate(v, i)
		}
		out[j] = kv
	}
	return out
}

// TwoLanguages are the target languages of a task that dubs into several
// at once (both have offline engines: apertium-eng-spa and -eng-cat).
const TwoLanguages = "es,ca"

// Submit uploads the clip and creates its task (the i-th) the way an operator does
// (into targets, dubctl's --target, when not empty),
// retrying (bounded) while the stack is down; it returns the task id.
// A failed attempt may still have created a task (the commit succeeded,
// its answer was lost); the checks read every task from the database, so
// such a task is judged like the others.
func (s *Submitter) Submit(ctx context.Context, c Clip, targets string, i int) (uuid.UUID, int, error) {
	var last error
	for try := 1; try <= 30; try++ {
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		args := []string{"submit", "--input", c.path}
		if targets != "" {
			args = append(args, "--target", targets)
		}
		cmd := exec.CommandContext(cctx, s.Dubctl, args...)
		cmd.Env = s.environ(i)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		cancel()
		if err == nil {
			id, perr := uuid.Parse(strings.TrimSpace(stdout.String()))
			if perr != nil {
				return uuid.Nil, try, fmt.Errorf("dubctl submit printed %q: %w", stdout.String(), perr)
			}
			return id, try, nil
		}
		last = fmt.Errorf("dubctl submit: %w: %s", err, strings.TrimSpace(stderr.String()))
		if ctx.Err() != nil {
			break
		}
		stack.SleepCtx(ctx, 2*time.Second)
	}
	return uuid.Nil, 30, last
}
