package task

// MissingAudioSQL is a column of the indexes (segments.idx, in order) of
// the segments of the task t that have no audio: what a compensating task
// waits for — the segments a re-drive synthesizes (pkg/compensation), and
// those the read model lists for it (pkg/view).
const MissingAudioSQL = `ARRAY(SELECT s.idx FROM segments s WHERE ` + LacksAudioSQL + ` ORDER BY s.idx)`

// LacksAudioSQL holds for the segments s of the task t that have no audio.
const LacksAudioSQL = `s.task_id = t.id AND s.tts_audio_key IS NULL`
