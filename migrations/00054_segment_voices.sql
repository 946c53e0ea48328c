-- +goose Up
-- segments.pitch_hz, segments.brightness_hz: the voice asr measured in the
-- segment (median pitch of its voiced frames, median RMS frequency of their
-- spectrum; 0 when it could not tell). tts tells the speakers apart from
-- them as the segments arrive, chunk by chunk, without the whole audio.
ALTER TABLE segments ADD COLUMN pitch_hz double precision NOT NULL DEFAULT 0;
ALTER TABLE segments ADD COLUMN brightness_hz double precision NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE segments DROP COLUMN brightness_hz;
ALTER TABLE segments DROP COLUMN pitch_hz;
