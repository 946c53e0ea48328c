-- +goose Up
-- task_plans: what a task asks beyond its languages (issue 49), one row for
-- a task that asks anything, written with the task at submit (task.Submit)
-- and again by extract_audio in its success transaction (for an outside
-- publisher's message, whose task no door created):
--   skipped_steps        the steps its plan leaves out: asr for a task that
--                        starts from a person's subtitles in the source
--                        language, asr and translate for subtitles in the
--                        target language. No attempt of a skipped step is
--                        ever made.
--   subtitles_key        the subtitle file it starts from
--   subtitles_language   (subtitles/{task_id}/...) and its language;
--   source_subtitles_key the second file with the source text, if any;
--   burn_subtitles       'target' or 'bilingual': mux_video also writes
--                        final.burned.mp4 with those subtitles drawn in
--                        (a redub's version too); '' for none.
CREATE TABLE task_plans (
    task_id              uuid        PRIMARY KEY REFERENCES tasks (id) ON DELETE CASCADE,
    skipped_steps        text[]      NOT NULL DEFAULT '{}'
                         CHECK (skipped_steps <@ ARRAY['asr', 'translate']),
    subtitles_key        text        NOT NULL DEFAULT '',
    subtitles_language   text        NOT NULL DEFAULT '',
    source_subtitles_key text        NOT NULL DEFAULT '',
    burn_subtitles       text        NOT NULL DEFAULT ''
                         CHECK (burn_subtitles IN ('', 'target', 'bilingual')),
    created_at           timestamptz NOT NULL DEFAULT now()
);

-- step_succeeded: a step the task's plan skips counts as done, so that
-- claim_step's p_after (tts after translate, mux_video after tts) and the
-- fan-ins (emit_when_steps_done: mux_video once asr, translate and tts
-- are) go on without it. The read model tells a skipped step from one
-- that ran (pkg/view).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION step_succeeded(p_task uuid, p_step text) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM task_plans pl WHERE pl.task_id = p_task AND p_step = ANY(pl.skipped_steps))
        OR (EXISTS (SELECT 1 FROM task_steps s
                     WHERE s.task_id = p_task AND s.step = p_step AND s.status = 'succeeded')
            AND NOT EXISTS (SELECT 1 FROM step_parts p
                             WHERE p.task_id = p_task AND p.step = p_step
                               AND NOT EXISTS (SELECT 1 FROM task_steps s
                                               WHERE s.task_id = p.task_id AND s.step = p.step
                                                 AND s.part = p.part AND s.status = 'succeeded')))
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION step_succeeded(p_task uuid, p_step text) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM task_steps s
                   WHERE s.task_id = p_task AND s.step = p_step AND s.status = 'succeeded')
       AND NOT EXISTS (SELECT 1 FROM step_parts p
                       WHERE p.task_id = p_task AND p.step = p_step
                         AND NOT EXISTS (SELECT 1 FROM task_steps s
                                         WHERE s.task_id = p.task_id AND s.step = p.step
                                           AND s.part = p.part AND s.status = 'succeeded'))
$$;
-- +goose StatementEnd
DROP TABLE task_plans;
