package view

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/dubflow/dubflow/pkg/task"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// loadLanguages reads task id's family: nil for a task of one language.
func loadLanguages(ctx context.Context, tx pgx.Tx, id uuid.UUID) (*Languages, error) {
	f, err := task.FamilyOf(ctx, tx, id)
	if err != nil {
		return nil, err
	}
	if f.ParentID == uuid.Nil && len(f.Targets) == 0 {
		return nil, nil
	}
	l := &Languages{TargetLanguages: f.Targets, Children: []Child{}}
	if l.TargetLanguages == nil {
		l.TargetLanguages = []string{}
	}
	if f.ParentID != uuid.Nil {
		p := f.ParentID
		l.ParentTaskID = &p
		return l, nil
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
		l.Children = append(l.Children, Child{TaskID: c.ID, TargetLanguage: c.TargetLanguage, Status: c.Status,
			Error: c.Error, OutputVideoKey: c.OutputVideoKey, Result: results[c.ID], CreatedAt: c.CreatedAt,
			UpdatedAt: c.UpdatedAt, Links: ChildLinks{Subtitles: []SubtitleLink{}}})
	}
	return l, nil
}

// ChildrenOf lists a parent's children (none for any other task).
func (t *Task) ChildrenOf() []Child {
	if t.Languages == nil {
		return nil
	}
	return t.Languages.Children
}
