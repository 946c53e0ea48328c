-- +goose Up
-- output_versions: every output a task produced. Version 1 is the first dub;
-- each re-dub of a line (dubctl redub) makes the next version with its own
-- object keys (outputs/{task_id}/v{n}/..., tts/{task_id}/v{n}/...), so the
-- objects of earlier versions are never overwritten. A version's output is
-- ready once its mux_video part (v{n}; "" for version 1) has succeeded.
CREATE TABLE output_versions (
    task_id           uuid NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    version           integer NOT NULL CHECK (version >= 1),
    output_video_key  text NOT NULL,
    dub_audio_key     text NOT NULL DEFAULT '',
    -- the segment this version re-dubbed (NULL for the first dub), with its
    -- translation before and after.
    segment_idx       integer,
    previous_text     text,
    text              text,
    created_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_id, version)
);

-- +goose Down
DROP TABLE output_versions;
