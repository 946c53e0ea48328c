package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/dubflow/dubflow/pkg/consoleapi"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// This file is the console's side of a task that dubs into several
// languages at once: a parent task names its
// targetLanguages; where its asr completes, one child task per language is
// spawned (id wire.ChildTaskID(parent, language)), each muxing the video it
// reads from videos/{child}/source.mp4.

// languagesView is the "languages" object of GET /api/tasks/{id}
// (consoleapi.Languages) with each child's mux_video result, for its links.
type languagesView struct {
	consoleapi.Languages
	results []json.RawMessage // of Children, in order
}

// loadLanguages reads task id's family: nil for a task of one language.
func loadLanguages(ctx context.Context, tx pgx.Tx, id uuid.UUID) (*languagesView, error) {
	f, err := task.FamilyOf(ctx, tx, id)
	if err != nil {
		return nil, err
	}
	if f.ParentID == uuid.Nil && len(f.Targets) == 0 {
		return nil, nil
	}
	v := &languagesView{Languages: consoleapi.Languages{TargetLanguages: f.Targets, Children: []consoleapi.Child{}}}
	if v.TargetLanguages == nil {
		v.TargetLanguages = []string{}
	}
	if f.ParentID != uuid.Nil {
		p := f.ParentID
		v.ParentTaskID = &p
		return v, nil
	}
	results := map[uuid.UUID]json.RawMessage{}
	rows, err := tx.Query(ctx, `SELECT id, result FROM tasks WHERE parent_task_id = $1 AND result IS NOT NULL`, id)
	if err != nil {
		return nil, fmt.Errorf("read results of the children of %s: %w", id, err)
	}
	var cid uuid.UUID
	var res json.RawMessage
	if _, err := pgx.ForEachRow(rows, []any{&cid, &res}, func() error {
		results[cid] = append(json.RawMessage(nil), res...)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read results of the children of %s: %w", id, err)
	}
	for _, c := range f.Children {
		v.Children = append(v.Children, consoleapi.Child{TaskID: c.ID, TargetLanguage: c.TargetLanguage, Status: c.Status,
			Error: c.Error, OutputVideoKey: c.OutputVideoKey, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt,
			Links: consoleapi.ChildLinks{Subtitles: []subtitleLink{}}})
		v.results = append(v.results, results[c.ID])
	}
	return v, nil
}

// childLinksOf presigns the outputs of each child that is done.
func (s *server) childLinksOf(ctx context.Context, v *languagesView) {
	if v == nil {
		return
	}
	for i := range v.Children {
		c := &v.Children[i]
		var res result
		if c.Status != task.Done || len(v.results[i]) == 0 || json.Unmarshal(v.results[i], &res) != nil {
			continue
		}
		l, _ := s.resultLinks(ctx, res, false)
		c.Links = consoleapi.ChildLinks{Output: l.Output, Subtitles: l.Subtitles}
	}
}
