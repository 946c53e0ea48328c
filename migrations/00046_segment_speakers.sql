-- +goose Up
-- segments.speaker: the speaker turn the segment belongs to ("S1", "S2", ...
-- found by asr from the voice's pitch and spectrum; "" when unknown).
-- segments.voice: the synthesis voice chosen for that speaker.
ALTER TABLE segments ADD COLUMN speaker text NOT NULL DEFAULT '';
ALTER TABLE segments ADD COLUMN voice text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE segments DROP COLUMN voice;
ALTER TABLE segments DROP COLUMN speaker;
