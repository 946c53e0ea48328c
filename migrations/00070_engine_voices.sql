-- +goose Up
-- The voices a tts worker's engine has, announced with its languages
-- (pkg/admit.Announce): voice names as the engine takes them, variants as
-- "+variant", or ["*"] for an engine that takes any name. The doors judge a
-- task's speaker by them as they judge its languages (issue 47): a speaker
-- no announced engine has is refused at submit. NULL: the worker announced
-- no voices (one older than this column), and its row does not judge the
-- speaker.
ALTER TABLE engine_capabilities ADD COLUMN voices jsonb
    CHECK (voices IS NULL OR jsonb_typeof(voices) = 'array');

-- +goose Down
ALTER TABLE engine_capabilities DROP COLUMN voices;
