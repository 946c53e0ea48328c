package task

// SaveGlossarySQL stores a task's glossary (arguments: task id, the terms as
// JSON); a later save replaces it. pkg/task writes task_glossaries, as it
// writes the task's plan: this statement, and Spawn's copy of a parent's
// glossary into its child. pkg/dub reads it back (dub.Glossary).
const SaveGlossarySQL = `INSERT INTO task_glossaries (task_id, terms) VALUES ($1, $2::jsonb)
	ON CONFLICT (task_id) DO UPDATE SET terms = EXCLUDED.terms`
