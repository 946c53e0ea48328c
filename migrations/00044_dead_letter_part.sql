-- +goose Up
-- dead_letters.part: the part of the step (a translate batch, a tts segment)
-- whose message was dead-lettered, so that an operator sees which part of a
-- fanned-out step failed without decoding the original message; '' for a
-- step that is not fanned out, and for dead letters recorded before this
-- migration.
ALTER TABLE dead_letters ADD COLUMN part text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE dead_letters DROP COLUMN part;
