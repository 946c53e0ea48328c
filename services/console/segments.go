package main

import (
	"net/http"
	"strconv"

	"github.com/dubflow/dubflow/pkg/view"
	"github.com/google/uuid"
)

// segmentList is GET /api/tasks/{id}/segments.
type segmentList struct {
	TaskID   uuid.UUID      `json:"taskId"`
	Segments []view.Segment `json:"segments"`
}

// versionList is GET /api/tasks/{id}/versions.
type versionList struct {
	TaskID   uuid.UUID      `json:"taskId"`
	Versions []view.Version `json:"versions"`
}

// taskSegments lists a task's lines (view.Segments, as dubctl segments
// prints them), numbered from 1; each can be changed with POST
// /api/tasks/{id}/redub.
func (s *server) taskSegments(w http.ResponseWriter, r *http.Request) {
	id, err := taskID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	segs, err := view.Segments(r.Context(), s.pool, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, segmentList{TaskID: id, Segments: segs})
}

// taskVersions lists a task's outputs, the first dub and each re-dub
// (view.Versions, as dubctl versions prints them).
func (s *server) taskVersions(w http.ResponseWriter, r *http.Request) {
	id, err := taskID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	vs, err := view.Versions(r.Context(), s.pool, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if r.URL.Query().Get("links") != "true" {
		writeJSON(w, http.StatusOK, versionList{TaskID: id, Versions: vs})
		return
	}
	// ?links=true adds a download link of each ready version's video (the
	// page's Versions list), by version number, and of its video with
	// subtitles burned in, when it has one.
	urls, burned := map[string]*string{}, map[string]*string{}
	for _, v := range vs {
		if v.Ready {
			urls[strconv.Itoa(v.Version)] = s.presign(r.Context(), v.OutputVideoKey)
		}
		if v.BurnedVideoKey != "" {
			burned[strconv.Itoa(v.Version)] = s.presign(r.Context(), v.BurnedVideoKey)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"taskId": id, "versions": vs, "links": urls, "burnedLinks": burned})
}
