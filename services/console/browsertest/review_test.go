package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/google/uuid"
)

// editedSource is the line the test types on the review page.
const editedSource = "Good evening, my friends."

// TestReviewInBrowser: a video is uploaded from the page with a review of
// its transcript; the task waits in review and its page shows the lines;
// the first line's source audio plays; its text is edited on the page and
// saved, then approved; the task ends done, its final line carries the
// edit (spoken: it has its speech, translated from the edited text), and
// the Timeline tab shows the edit and the approval.
func TestReviewInBrowser(t *testing.T) {
	needBrowser(t)
	s := newStack(t)
	video := sampleVideo(t)
	b := newBrowser(t, s.console)
	b.login(s.token)
	id := b.uploadForReview(video)
	b.waitTaskStatus(id, "review", 4*time.Minute)
	b.waitFor(`document.querySelectorAll('#review-table tr[id^="review-line-"]').length > 0 &&
		document.querySelector('#review-source-1').value !== ''`, 30*time.Second)
	b.shot("review")
	b.listenToLine1()
	b.run(10*time.Second, "edit line 1", chromedp.SetValue(chromedp.CSS("#review-source-1"), editedSource),
		chromedp.Click(chromedp.CSS("#review-save-1")))
	b.waitFor(`[...document.querySelectorAll('#flash div')].some(e => e.textContent === 'Line 1: edit saved') &&
		document.querySelector('#review-source-1').value === `+fmt.Sprintf("%q", editedSource)+` &&
		document.querySelector('#review-text-1').value === ''`, 10*time.Second)
	b.shot("review-edited")
	b.seeWaiting(id)
	b.visit("/tasks/"+id, "#review-approve")
	b.click("#review-approve")
	b.waitFor(`[...document.querySelectorAll('#flash div')].some(e => e.textContent.startsWith('Approved the transcript'))`, 10*time.Second)
	b.waitTaskStatus(id, "done", 6*time.Minute)
	b.checkFinalLine(id)
	b.visit("/tasks/"+id+"#timeline", "#timeline-table")
	b.waitFor(fmt.Sprintf(`[...document.querySelectorAll('#timeline-table tr[data-kind="review_edit"]')].some(r =>
		r.textContent.includes(%q) && r.textContent.includes('admin')) &&
		!!document.querySelector('#timeline-table tr[data-kind="review_approved"]') &&
		!!document.querySelector('#timeline-table tr[data-kind="review"]')`, editedSource), 30*time.Second)
	b.shot("review-timeline")
	s.checkFinalSegments(t, id)
	b.checkNoPageErrors()
}

// uploadForReview submits the video through the upload form with the
// review of its transcript asked, and returns the task id.
func (b *browser) uploadForReview(video string) string {
	b.t.Helper()
	b.visit("/upload", "#upload-form")
	b.run(30*time.Second, "choose the video and the review", chromedp.SetUploadFiles(chromedp.CSS("#video"), []string{video}),
		chromedp.Click(chromedp.CSS("#review-transcript")))
	b.waitFor(`/KiB|MiB/.test(document.querySelector('#upload-status').textContent) &&
		document.querySelector('#review-transcript').checked`, 10*time.Second)
	b.shot("upload-review")
	b.run(10*time.Second, "submit", chromedp.Click(chromedp.CSS("#upload")))
	b.waitFor(`/^\/tasks\/[0-9a-f-]{36}$/.test(location.pathname)`, 2*time.Minute)
	id := regexp.MustCompile(`[0-9a-f-]{36}$`).FindString(b.location())
	b.t.Logf("task %s", id)
	return id
}

// seeWaiting finds the task waiting in review in the task list's review
// filter, with what it waits for, and on the health page, not as a reason.
func (b *browser) seeWaiting(id string) {
	b.t.Helper()
	b.visit("/tasks?status=review", "#tasks")
	b.waitFor(fmt.Sprintf(`(() => { const r = document.querySelector('#tasks tr[data-id=%q]');
		return !!r && r.querySelector('.review-note').textContent.startsWith('transcript · waiting'); })()`, id), 30*time.Second)
	b.shot("tasks-in-review")
	b.visit("/health", "#health-review")
	b.waitFor(fmt.Sprintf(`!!document.querySelector('#review-waits tr[data-id=%q]') &&
		![...document.querySelectorAll('#health-reasons li')].some(li => li.textContent.includes(%q))`, id, id), 30*time.Second)
	b.shot("health-review")
}

// listenToLine1 plays line 1's source audio from the page: the player
// loads the clip (a WAV of the line's length) and plays it.
func (b *browser) listenToLine1() {
	b.t.Helper()
	b.click("#review-play-1")
	b.waitFor(`(() => { const a = document.querySelector('#review-audio');
		if (a.error) throw new Error('media error ' + a.error.code + ': ' + a.error.message);
		return a.src.includes('/review/audio?line=1') && a.readyState >= 2 && a.duration > 0.3 && a.currentTime > 0; })()`, 30*time.Second)
}

// checkFinalLine reads the task's lines on the page's API: line 1 carries
// the edit, with a translation and its speech.
func (b *browser) checkFinalLine(id string) {
	b.t.Helper()
	segs, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]view.Segment](
		fmt.Sprintf(`window.__dubflow.api('/api/tasks/%s/segments').then(d => d.segments)`, id), chromedp.EvalAwaitPromise))
	if err != nil || len(segs) == 0 {
		b.t.Fatalf("segments: %v", err)
	}
	got := segs[0]
	if got.SourceText != editedSource || got.Text == nil || !strings.Contains(strings.ToLower(*got.Text), "amigos") || !got.Synthesized {
		b.t.Fatalf("line 1 after the dub: %+v; want %q translated and spoken", got, editedSource)
	}
}

// checkFinalSegments checks in the database that the final line carries
// the edit and that the edit is kept with who, before and after.
func (s *stack) checkFinalSegments(t *testing.T, id string) {
	t.Helper()
	ctx := context.Background()
	var src string
	var before, after []byte
	var actor string
	if err := s.db.Pool.QueryRow(ctx, `SELECT s.src_text, e.actor, e.before, e.after FROM segments s
		JOIN review_edits e ON e.task_id = s.task_id AND e.action = 'edit'
		WHERE s.task_id = $1 ORDER BY s.idx LIMIT 1`, uuid.MustParse(id)).Scan(&src, &actor, &before, &after); err != nil {
		t.Fatal(err)
	}
	var b, a []view.ReviewLine
	_ = json.Unmarshal(before, &b)
	_ = json.Unmarshal(after, &a)
	if src != editedSource || actor != "admin" || len(b) != 1 || b[0].Source == editedSource || len(a) != 1 || a[0].Source != editedSource {
		t.Fatalf("final line %q; edit by %q: %s → %s", src, actor, before, after)
	}
}
