-- +goose Up
-- A growing stream (issue 53): while a long task is dubbed, mux_video
-- writes its dubbed audio and video, in order, as an HLS stream under
-- outputs/{task_id}/stream/, batch by batch, as the windows of the timeline
-- become final (every line in them synthesized). pkg/stream owns both
-- tables.
--   task_streams   one row per task that streams: how far the stream is made
--                  (made_until_ms: the end of its last batch), the timeline's
--                  length when known, when it ended (#EXT-X-ENDLIST), and the
--                  init segment the batches share (its key and SHA-256: a
--                  batch whose init differs names its own) with its codecs (RFC 6381, for the
--                  multivariant playlist), and why the last
--                  try to make a batch failed (the next message tries again;
--                  the stream never fails the task). version is the output
--                  version the playlists show: a re-dub re-makes the batches
--                  its lines touch and stores the playlists of its version
--                  beside the earlier ones (video-v2.m3u8), the multivariant
--                  playlist naming the newest.
--   stream_batches the batches in order: [from_ms, to_ms) of the timeline,
--                  the init segment they need, their pieces (key and length)
--                  and their subtitles (a WebVTT file).
CREATE TABLE task_streams (
    task_id        uuid PRIMARY KEY REFERENCES tasks (id) ON DELETE CASCADE,
    made_until_ms  integer NOT NULL DEFAULT 0 CHECK (made_until_ms >= 0),
    total_ms       integer CHECK (total_ms IS NULL OR total_ms >= 0),
    init_key       text NOT NULL DEFAULT '',
    init_sha256    text NOT NULL DEFAULT '',
    codecs         text NOT NULL DEFAULT '',
    ended_at       timestamptz,
    last_error     text NOT NULL DEFAULT '',
    version        integer NOT NULL DEFAULT 1 CHECK (version >= 1),
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE stream_batches (
    task_id   uuid NOT NULL REFERENCES task_streams (task_id) ON DELETE CASCADE,
    from_ms   integer NOT NULL CHECK (from_ms >= 0),
    to_ms     integer NOT NULL,
    map_key   text NOT NULL,
    pieces    jsonb NOT NULL,
    vtt_key   text NOT NULL,
    made_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_id, from_ms),
    CHECK (to_ms > from_ms)
);

-- +goose Down
DROP TABLE stream_batches;
DROP TABLE task_streams;
