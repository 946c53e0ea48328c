-- +goose Up
-- The probe of the task's source video (issue 32): media.ProbeRecord's
-- JSON, {"size", "sha256", "prober", "info"}: what ffprobe said of the
-- video, with the size and SHA-256 of the bytes it read and which ffprobe
-- it was. The door that admitted the task records its probe (dubctl in
-- database mode, the console); extract_audio reuses it when the video it
-- downloads hashes the same and its ffprobe is the same, else probes and
-- records its own; mux_video reuses that in turn. Each reuse saves an
-- ffprobe start (~0.05–0.24 CPU-s of loading its libraries, more than the
-- probe itself on a short clip). NULL when nothing was recorded (a task
-- published straight to the exchange, a video over 64 MB: probing it again
-- costs less than hashing it twice); a child task (one target language of
-- several) starts with its parent's: its video is a copy of the parent's.
ALTER TABLE tasks ADD COLUMN source_probe jsonb;

-- +goose Down
ALTER TABLE tasks DROP COLUMN source_probe;
