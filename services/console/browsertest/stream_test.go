package browsertest

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/dubflow/dubflow/pkg/media"
)

// TestStreamPlaysWhileDubbing: a long task's page plays its growing stream
// (HLS through the vendored hls.js) while the task still runs — the
// player's time passes 5 s before the task is done — from the stream's own
// pieces (the dub: services/e2e's TestStreamGrowsWhileTheTaskRuns compares
// their sound with final.mp4's dub track), with sound decoded, and the page
// raises no error (its Content-Security-Policy admits the player).
func TestStreamPlaysWhileDubbing(t *testing.T) {
	needBrowser(t)
	// Chunks of 20 s decoded one at a time: the stream's first stretch is
	// made long before the last.
	s := newStackWith(t, services, nil, map[string]string{"ASR_CHUNK_SECONDS": "20", "ASR_CONCURRENCY": "1"})
	video := longSampleVideo(t)
	b := newBrowser(t, s.console)
	b.login(s.token)
	id := b.upload(video, "")
	b.waitFor(`!!document.querySelector('#stream-video')`, 6*time.Minute)
	b.shot("stream-" + id[:8])
	const play = `(async () => {
		const v = document.querySelector('#stream-video');
		v.muted = true;
		for (let i = 0; i < 100 && v.readyState < 2; i++) await new Promise((r) => setTimeout(r, 100));
		await v.play();
		return true; })()`
	if _, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](play, chromedp.EvalAwaitPromise)); err != nil {
		t.Fatalf("play the stream: %v", err)
	}
	b.waitFor(`(() => { const v = document.querySelector('#stream-video');
		if (!v) throw new Error('the stream player went away before it played 5 s');
		if (v.error) throw new Error('media error ' + v.error.code + ': ' + v.error.message);
		return v.currentTime > 5; })()`, 3*time.Minute)
	state, err := chromedp.Run(b.ctx, chromedp.Evaluate[map[string]any](fmt.Sprintf(`(async () => {
		const v = document.querySelector('#stream-video');
		const t = await (await fetch('/api/tasks/%s', {credentials: 'same-origin'})).json();
		const pieces = performance.getEntriesByType('resource').filter((e) => /\/api\/tasks\/%s\/stream\/b\d+-\d+\.m4s$/.test(e.name)).length;
		return {status: t.status, currentTime: v.currentTime, pieces, audioBytes: v.webkitAudioDecodedByteCount || 0,
			playable: t.stream ? t.stream.playableSeconds : 0}; })()`, id, id), chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stream player: %v", state)
	if state["status"] == "done" {
		t.Errorf("the task was done before the stream played 5 s: %v", state)
	}
	if n, _ := state["pieces"].(float64); n < 1 {
		t.Errorf("the player fetched no piece of the stream: %v", state)
	}
	if n, _ := state["audioBytes"].(float64); n <= 0 {
		t.Errorf("the player decoded no sound: %v", state)
	}
	b.waitTaskStatus(id, "done", 6*time.Minute)
	b.checkNoPageErrors()
}

// longSampleVideo makes a clip of about two minutes of English speech
// (espeak-ng over a test picture).
func longSampleVideo(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "long.mp4")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	text := strings.Repeat("It was the best of times, it was the worst of times. The dubbing console plays this video while it is made. "+
		"Every stretch of the timeline is spoken again as soon as its lines are translated. ", 12)
	if err := media.MakeSampleVideo(ctx, text, out, media.SampleOptions{}); err != nil {
		t.Fatalf("make the long sample video: %v", err)
	}
	return out
}
