package tasks

import (
	"context"
	"net/http"
	"strconv"

	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/console/internal/route"
	"github.com/google/uuid"
)

// SegmentList is GET /api/tasks/{id}/segments.
type SegmentList struct {
	TaskID   uuid.UUID      `json:"taskId"`
	Segments []view.Segment `json:"segments"`
}

// VersionList is GET /api/tasks/{id}/versions.
type VersionList struct {
	TaskID   uuid.UUID      `json:"taskId"`
	Versions []view.Version `json:"versions"`
}

// Timeline is what GET /api/tasks/{id}/timeline answers.
type Timeline struct {
	TaskID uuid.UUID    `json:"taskId"`
	Events []view.Event `json:"events"`
}

// readTask answers GET of a part of the task {id}: what load reads of it,
// in the shape answer gives it.
func readTask[T any](s Room, load func(context.Context, view.Querier, uuid.UUID) (T, error),
	answer func(w http.ResponseWriter, r *http.Request, id uuid.UUID, v T)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, err := route.TaskID(r)
		var v T
		if err == nil {
			v, err = load(r.Context(), s.Pool, id)
		}
		if err != nil {
			s.Fail(w, r, err)
			return
		}
		answer(w, r, id, v)
	}
}

// taskSegments lists a task's lines (view.Segments, as dubctl segments
// prints them), numbered from 1; each can be changed with POST
// /api/tasks/{id}/redub.
func (s Room) taskSegments() http.HandlerFunc {
	return readTask(s, view.Segments, func(w http.ResponseWriter, _ *http.Request, id uuid.UUID, segs []view.Segment) {
		route.JSON(w, http.StatusOK, SegmentList{TaskID: id, Segments: segs})
	})
}

// taskTimeline answers every event of a task in order (view.Timeline).
func (s Room) taskTimeline() http.HandlerFunc {
	return readTask(s, view.Timeline, func(w http.ResponseWriter, _ *http.Request, id uuid.UUID, evs []view.Event) {
		route.JSON(w, http.StatusOK, Timeline{TaskID: id, Events: evs})
	})
}

// taskVersions lists a task's outputs, the first dub and each re-dub
// (view.Versions, as dubctl versions prints them).
func (s Room) taskVersions() http.HandlerFunc {
	return readTask(s, view.Versions, s.answerVersions)
}

// answerVersions answers a task's versions; ?links=true adds a download
// link of each ready version's video (the page's Versions list), by
// version number, and of its video with subtitles burned in, when it has
// one.
func (s Room) answerVersions(w http.ResponseWriter, r *http.Request, id uuid.UUID, vs []view.Version) {
	if r.URL.Query().Get("links") != "true" {
		route.JSON(w, http.StatusOK, VersionList{TaskID: id, Versions: vs})
		return
	}
	urls, burned := map[string]*string{}, map[string]*string{}
	for _, v := range vs {
		if v.Ready {
			urls[strconv.Itoa(v.Version)] = s.Link(r.Context(), v.OutputVideoKey)
		}
		if v.BurnedVideoKey != "" {
			burned[strconv.Itoa(v.Version)] = s.Link(r.Context(), v.BurnedVideoKey)
		}
	}
	route.JSON(w, http.StatusOK, map[string]any{"taskId": id, "versions": vs, "links": urls, "burnedLinks": burned})
}
