-- +goose Up
-- What extract_audio's ffprobe found about the task's source video (issue
-- 32): media.ProbeRecord's JSON, {"size", "sha256", "info"}. mux_video
-- downloads the same video and reuses the probe when the bytes hash the
-- same, instead of starting ffprobe again (~0.24 CPU-s of loading its
-- libraries, more than the probe itself on a short clip). NULL when
-- nothing was recorded: a task from before, a video over 64 MB (probing
-- it again costs less than hashing it twice), extract_audio not done yet.
-- A child task (one target language of several) starts with its parent's:
-- its source video is a copy of the parent's.
ALTER TABLE tasks ADD COLUMN source_probe jsonb;

-- +goose Down
ALTER TABLE tasks DROP COLUMN source_probe;
