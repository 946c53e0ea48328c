package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// This file is the console's side of a task that dubs into several
// languages at once (issue 13 item 7): a parent task names its
// targetLanguages; where its asr completes, one child task per language is
// spawned (id wire.ChildTaskID(parent, language)), each muxing the video it
// reads from videos/{child}/source.mp4.

// languagesView is the "languages" object of GET /api/tasks/{id}: a
// parent's languages and children, or a child's parent. A task of one
// language has none (null).
type languagesView struct {
	ParentTaskID    *uuid.UUID  `json:"parentTaskId"`
	TargetLanguages []string    `json:"targetLanguages"`
	Children        []childView `json:"children"`
}

// childView is one child task of a parent with links to its outputs.
type childView struct {
	TaskID         uuid.UUID       `json:"taskId"`
	TargetLanguage string          `json:"targetLanguage"`
	Status         string          `json:"status"`
	Error          string          `json:"error"`
	OutputVideoKey string          `json:"outputVideoKey"`
	CreatedAt      time.Time       `json:"createdAt"`
	UpdatedAt      time.Time       `json:"updatedAt"`
	Links          childLinks      `json:"links"`
	result         json.RawMessage // mux_video's result, for the links
}

// childLinks are presigned GET URLs of a child's outputs (null until done).
type childLinks struct {
	Output    *string        `json:"output"`
	Subtitles []subtitleLink `json:"subtitles"`
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
	v := &languagesView{TargetLanguages: f.Targets, Children: []childView{}}
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
		v.Children = append(v.Children, childView{TaskID: c.ID, TargetLanguage: c.TargetLanguage, Status: c.Status,
			Error: c.Error, OutputVideoKey: c.OutputVideoKey, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt,
			Links: childLinks{Subtitles: []subtitleLink{}}, result: results[c.ID]})
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
		if c.Status != task.Done || len(c.result) == 0 || json.Unmarshal(c.result, &res) != nil {
			continue
		}
		l, _ := s.resultLinks(ctx, res, false)
		c.Links = childLinks{Output: l.Output, Subtitles: l.Subtitles}
	}
}

// parseTargets reads the target languages of a submission: each value one
// language or several separated by commas, each once, at most
// wire.MaxTargetLanguages; none gives the default.
func parseTargets(values []string, def string) ([]string, error) {
	var out []string
	for _, v := range values {
		for _, l := range strings.Split(v, ",") {
			l = strings.TrimSpace(l)
			if l == "" {
				continue
			}
			if !languagePattern.MatchString(l) {
				return nil, badRequest(fmt.Sprintf("target %q: want a language code such as en or es", l))
			}
			for _, seen := range out {
				if seen == l {
					return nil, badRequest(fmt.Sprintf("target names %q twice", l))
				}
			}
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		out = []string{def}
	}
	if len(out) > wire.MaxTargetLanguages {
		return nil, badRequest(fmt.Sprintf("target names %d languages, at most %d", len(out), wire.MaxTargetLanguages))
	}
	return out, nil
}
