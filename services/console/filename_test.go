package main

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/dubflow/dubflow/pkg/view"
	"github.com/google/uuid"
)

// TestUploadedFileNameIsKeptAndSearched: the name a video was uploaded as
// is kept by both of the console's doors (the multipart upload's file
// name, the presigned upload's fileName), shown with the task and found
// by GET /api/tasks?q= in any case.
func TestUploadedFileNameIsKeptAndSearched(t *testing.T) {
	t.Parallel()
	f := setup(t)
	video := sampleVideo(t, "1")
	ct, body := multipartNamed(t, video, "Holiday Trip (2024).mp4", url.Values{"source": {"en"}, "target": {"es"}})
	var first created
	decode(t, f.do(t, "POST", "/api/tasks", adminToken, ct, body), http.StatusCreated, &first)

	up := f.presignedUpload(t, video)
	var second created
	f.doJSON(t, "POST", "/api/tasks", map[string]any{"sourceVideoKey": up.SourceVideoKey, "fileName": `C:\videos\Quarterly Talk.mp4`},
		http.StatusCreated, &second)

	for id, want := range map[uuid.UUID]string{first.TaskID: "Holiday Trip (2024).mp4", second.TaskID: "Quarterly Talk.mp4"} {
		var d view.Summary
		f.doJSON(t, "GET", "/api/tasks/"+id.String(), nil, http.StatusOK, &d)
		if d.FileName != want {
			t.Errorf("task %s: fileName %q, want %q", id, d.FileName, want)
		}
	}
	for q, want := range map[string][]uuid.UUID{
		"holiday":          {first.TaskID},
		"QUARTERLY TALK":   {second.TaskID},
		".mp4":             {second.TaskID, first.TaskID},
		"trip (2024)":      {first.TaskID},
		"no such file 100": nil,
	} {
		var page view.Page
		f.doJSON(t, "GET", "/api/tasks?q="+url.QueryEscape(q), nil, http.StatusOK, &page)
		var got []uuid.UUID
		for _, s := range page.Tasks {
			got = append(got, s.TaskID)
		}
		if len(got) != len(want) || (len(want) > 0 && (got[0] != want[0] || got[len(got)-1] != want[len(want)-1])) {
			t.Errorf("q=%q: %v, want %v", q, got, want)
		}
	}
}
