package main

import (
	"encoding/json"
	"net/http"

	"github.com/dubflow/dubflow/pkg/dub"
	"github.com/google/uuid"
)

// segmentView is one line of a dub as `dubctl segments` shows it.
type segmentView struct {
	// N numbers the line from 1 in timeline order: the number redub takes.
	N       int    `json:"n"`
	StartMS int    `json:"startMs"`
	EndMS   int    `json:"endMs"`
	Speaker string `json:"speaker"`
	Voice   string `json:"voice"`
	// SourceText is what was said; Text the translation that is spoken
	// (null while not translated yet).
	SourceText  string  `json:"sourceText"`
	Text        *string `json:"text"`
	Synthesized bool    `json:"synthesized"`
	// Fit is what synthesis recorded about the clip in its slot (engine
	// settings, slot_ms, …), null before synthesis.
	Fit   json.RawMessage `json:"fit"`
	Error string          `json:"error"`
}

// segmentList is GET /api/tasks/{id}/segments.
type segmentList struct {
	TaskID   uuid.UUID     `json:"taskId"`
	Segments []segmentView `json:"segments"`
}

// taskSegments lists a task's lines (dub.Segments, as dubctl segments
// prints them); each can be changed with POST /api/tasks/{id}/redub.
func (s *server) taskSegments(w http.ResponseWriter, r *http.Request) {
	id, err := taskID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	segs, err := dub.Segments(r.Context(), s.pool, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := segmentList{TaskID: id, Segments: make([]segmentView, 0, len(segs))}
	for _, sg := range segs {
		out.Segments = append(out.Segments, segmentView{N: sg.N, StartMS: sg.StartMS, EndMS: sg.EndMS,
			Speaker: sg.Speaker, Voice: sg.Voice, SourceText: sg.SourceText, Text: sg.Text,
			Synthesized: sg.Synthesized, Fit: sg.Fit, Error: sg.Error})
	}
	writeJSON(w, http.StatusOK, out)
}
