-- +goose Up
-- task_glossaries: the glossary a task's translation keeps to, as a JSON
-- array of {"source": ..., "target": ...} ("target" empty: keep the term as
-- it is). Written when the task is created (dubctl submit, extract_audio).
CREATE TABLE task_glossaries (
    task_id     uuid PRIMARY KEY REFERENCES tasks (id) ON DELETE CASCADE,
    terms       jsonb NOT NULL DEFAULT '[]'::jsonb,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE task_glossaries;
