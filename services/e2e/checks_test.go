package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/minio/minio-go/v7"
)

// taskJSON is the part of `dubctl wait --json` / `status --json` the tests
// read.
type taskJSON struct {
	TaskID         uuid.UUID       `json:"taskId"`
	Status         string          `json:"status"`
	Error          string          `json:"error"`
	OutputVideoKey string          `json:"outputVideoKey"`
	OutputPath     string          `json:"outputPath"`
	SubtitlePaths  []string        `json:"subtitlePaths"`
	Result         json.RawMessage `json:"result"`
	Steps          []struct {
		Step       string     `json:"step"`
		Status     string     `json:"status"`
		Attempts   int        `json:"attempts"`
		StartedAt  *time.Time `json:"startedAt"`
		FinishedAt *time.Time `json:"finishedAt"`
	} `json:"steps"`
	Segments struct {
		Total       int `json:"total"`
		Translated  int `json:"translated"`
		Synthesized int `json:"synthesized"`
		FailedTTS   int `json:"failedTts"`
	} `json:"segments"`
}

// decodeTask parses dubctl's JSON output.
func decodeTask(tb testing.TB, stdout, stderr string) taskJSON {
	tb.Helper()
	var v taskJSON
	if err := json.Unmarshal([]byte(stdout), &v); err != nil {
		tb.Fatalf("dubctl output is not a task: %v\nstdout: %s\nstderr: %s", err, stdout, stderr)
	}
	return v
}

// waitTask runs `dubctl wait --json` on id.
func (s *stack) waitTask(tb testing.TB, ctx context.Context, id uuid.UUID, out string, timeout time.Duration) (taskJSON, int) {
	tb.Helper()
	args := []string{"wait", id.String(), "--json", "--timeout", timeout.String()}
	if out != "" {
		args = append(args, "--output", out)
	}
	stdout, stderr, code := s.dubctl(tb, ctx, args...)
	return decodeTask(tb, stdout, stderr), code
}

// videoMD5 hashes the packets of the first video stream.
func videoMD5(tb testing.TB, ctx context.Context, path string) string {
	tb.Helper()
	out, err := exec.CommandContext(ctx, "ffmpeg", "-nostdin", "-v", "error", "-i", path,
		"-map", "0:v:0", "-c", "copy", "-f", "md5", "-").Output()
	if err != nil {
		tb.Fatalf("hash the video of %s: %v", path, err)
	}
	return strings.TrimSpace(string(out))
}

// checkDubbed checks a dubbed video against its input: the video stream is
// bit-identical, the dub audio (the first, default track) lasts as long as
// the video and is not silent where the input spoke, subtitles are muxed
// in and stored as SRT objects, every step succeeded exactly once (per part)
// and every segment was translated and synthesized.
func (s *stack) checkDubbed(t *testing.T, ctx context.Context, v taskJSON, input, output string, speechFrom, speechTo time.Duration) {
	t.Helper()
	if v.Status != "done" {
		t.Fatalf("task %s is %s (error %q), want done", v.TaskID, v.Status, v.Error)
	}
	if got, want := videoMD5(t, ctx, output), videoMD5(t, ctx, input); got != want {
		t.Errorf("video stream of the output differs from the input: %s, want %s", got, want)
	}
	info, err := media.Probe(ctx, output)
	if err != nil {
		t.Fatalf("probe output: %v", err)
	}
	videos, audios := info.StreamsOf(media.VideoStream), info.StreamsOf(media.AudioStream)
	if len(videos) != 1 || len(audios) < 1 {
		t.Fatalf("output has %d video and %d audio streams, want 1 and at least 1", len(videos), len(audios))
	}
	if d := videos[0].Duration - audios[0].Duration; math.Abs(d.Seconds()) > 0.5 {
		t.Errorf("dub audio lasts %s, video %s: differ by more than 0.5s", audios[0].Duration, videos[0].Duration)
	}
	if lang := audios[0].Language; lang != "spa" && lang != "es" {
		t.Errorf("first audio track is tagged %q, want the Spanish dub (spa)", lang)
	}
	if subs := info.StreamsOf(media.SubtitleStream); len(subs) == 0 {
		t.Errorf("output has no subtitle track")
	}
	// The dub (first audio track) where the input spoke.
	clip := filepath.Join(t.TempDir(), "dub-speech.wav")
	cmd := exec.CommandContext(ctx, "ffmpeg", "-nostdin", "-v", "error", "-i", output, "-map", "0:a:0",
		"-ss", fmt.Sprintf("%.3f", speechFrom.Seconds()), "-to", fmt.Sprintf("%.3f", speechTo.Seconds()),
		"-ac", "1", "-c:a", "pcm_s16le", clip)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("extract dub audio: %v\n%s", err, out)
	}
	vol, err := media.MeasureVolume(ctx, clip)
	if err != nil {
		t.Fatal(err)
	}
	if vol.MaxDB < -30 || vol.MeanDB < -45 {
		t.Errorf("dub audio between %s and %s is near silent: mean %.1f dB, peak %.1f dB", speechFrom, speechTo, vol.MeanDB, vol.MaxDB)
	}
	// SRT objects beside the output, and the copies dubctl downloaded.
	var srt []string
	for obj := range s.bucket.Client.ListObjects(ctx, s.bucket.Name, minio.ListObjectsOptions{
		Prefix: wire.KindOutput + "/" + v.TaskID.String() + "/", Recursive: true}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		if strings.HasSuffix(obj.Key, ".srt") {
			srt = append(srt, obj.Key)
		}
	}
	if len(srt) == 0 {
		t.Errorf("no SRT object under outputs/%s/", v.TaskID)
	}
	if output == v.OutputPath && len(v.SubtitlePaths) == 0 {
		t.Errorf("dubctl wait downloaded no subtitles")
	}
	for _, p := range v.SubtitlePaths {
		data, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(data, []byte(" --> ")) {
			t.Errorf("subtitle %s is not SRT (%v): %.200q", p, err, data)
		}
	}
	t.Logf("task %s: video %s, %d audio and %d subtitle tracks, dub %.1f dB mean / %.1f dB peak in the speech, SRT objects %v",
		v.TaskID, videoMD5(t, ctx, output), len(audios), len(info.StreamsOf(media.SubtitleStream)), vol.MeanDB, vol.MaxDB, srt)
	s.checkSteps(t, ctx, v.TaskID)
	s.checkSegments(t, ctx, v.TaskID)
}

// checkSteps: exactly one succeeded attempt per part of every step; asr's
// chunks and translate's batches are the parts registered for them, tts has
// one part per translate batch, the other steps one part.
func (s *stack) checkSteps(t *testing.T, ctx context.Context, id uuid.UUID) {
	t.Helper()
	rows, err := s.db.Pool.Query(ctx, `SELECT step, part, count(*) FILTER (WHERE status = 'succeeded')
		FROM task_steps WHERE task_id = $1 GROUP BY step, part ORDER BY step, part`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	parts := map[string]int{}
	for rows.Next() {
		var step, part string
		var n int
		if err := rows.Scan(&step, &part, &n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("step %s part %q has %d succeeded attempts, want 1", step, part, n)
		}
		parts[step]++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, step := range workers {
		if parts[step] == 0 {
			t.Errorf("step %s has no attempt", step)
		}
		switch step {
		case wire.StepASR, wire.StepTranslate:
			// Chunks of the audio, batches of the lines: every registered
			// part succeeded (and, above, none twice).
			var registered, unfinished int
			if err := s.db.Pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE NOT EXISTS (
					SELECT 1 FROM task_steps s WHERE s.task_id = p.task_id AND s.step = p.step AND s.part = p.part AND s.status = 'succeeded'))
				FROM step_parts p WHERE p.task_id = $1 AND p.step = $2`, id, step).Scan(&registered, &unfinished); err != nil {
				t.Fatal(err)
			}
			if unfinished != 0 {
				t.Errorf("%s has %d of %d registered parts without a succeeded attempt", step, unfinished, registered)
			}
			if step == wire.StepTranslate && registered != parts[step] {
				t.Errorf("translate has %d registered parts and %d with attempts", registered, parts[step])
			}
		case wire.StepTTS:
			// One tts part per translate batch, each emitted by its batch.
			if parts[step] != parts[wire.StepTranslate] {
				t.Errorf("tts has %d parts, want one per translate batch (%d)", parts[step], parts[wire.StepTranslate])
			}
		default:
			if parts[step] != 1 {
				t.Errorf("step %s has %d parts, want 1", step, parts[step])
			}
		}
	}
}

// checkSegments: at least one segment, all translated and synthesized.
func (s *stack) checkSegments(t *testing.T, ctx context.Context, id uuid.UUID) {
	t.Helper()
	var total, untranslated, unsynthesized int
	if err := s.db.Pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE mt_text IS NULL),
		count(*) FILTER (WHERE tts_audio_key IS NULL) FROM segments WHERE task_id = $1`, id).
		Scan(&total, &untranslated, &unsynthesized); err != nil {
		t.Fatal(err)
	}
	if total == 0 || untranslated != 0 || unsynthesized != 0 {
		t.Errorf("segments: %d, of which %d untranslated and %d unsynthesized; want some, all done",
			total, untranslated, unsynthesized)
	}
}
