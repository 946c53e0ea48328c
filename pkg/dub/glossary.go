package dub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// SaveGlossarySQL stores a task's glossary (arguments: task id, the terms as
// JSON); a later save replaces it. The statement is pkg/task's, the one
// writer of task_glossaries (task.SaveGlossarySQL).
const SaveGlossarySQL = task.SaveGlossarySQL

// GlossaryJSON encodes terms for SaveGlossarySQL.
func GlossaryJSON(terms []wire.Term) ([]byte, error) {
	b, err := json.Marshal(terms)
	if err != nil {
		return nil, fmt.Errorf("encode glossary: %w", err)
	}
	return b, nil
}

// Glossary returns the task's glossary, nil when it has none.
func Glossary(ctx context.Context, db Querier, taskID uuid.UUID) ([]wire.Term, error) {
	var raw []byte
	err := db.QueryRow(ctx, `SELECT terms FROM task_glossaries WHERE task_id = $1`, taskID).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read glossary of %s: %w", taskID, err)
	}
	var terms []wire.Term
	if err := json.Unmarshal(raw, &terms); err != nil {
		return nil, fmt.Errorf("read glossary of %s: %w", taskID, err)
	}
	return terms, nil
}
