package main

import (
	"os"

	"github.com/dubflow/dubflow/pkg/speaker"
	"github.com/dubflow/dubflow/pkg/speech"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/google/uuid"
	"github.com/rs/zerolog"
)

// voicesOf measures the voice of each segment in wav, a 16 kHz mono WAV
// file that starts at offsetMS of the timeline, so that tts can tell the
// speakers apart as the chunks arrive. When the file cannot be measured
// every voice is unknown (tts then gives those segments the voice of their
// neighbours) and the reason is logged: the transcript still counts.
func voicesOf(wav string, offsetMS int, segs []speech.Segment, log zerolog.Logger) []speaker.Voice {
	voices := make([]speaker.Voice, len(segs))
	if len(segs) == 0 {
		return voices
	}
	spans := make([]speaker.Span, len(segs))
	for i, s := range segs {
		spans[i] = speaker.Span{StartMS: max(s.StartMS-offsetMS, 0), EndMS: max(s.EndMS-offsetMS, 0)}
	}
	f, err := os.Open(wav)
	if err == nil {
		defer f.Close()
		var got []speaker.Voice
		if got, err = speaker.Measure(f, spans); err == nil {
			return got
		}
	}
	log.Warn().Err(err).Msg("voices not measured: the speakers of these segments are told by their neighbours")
	return voices
}

// upsertSegmentsSQL writes the segments in one statement. A re-run that
// recognises the same text keeps the translation (and, with the same
// timing, the synthesized audio); a changed segment starts over.
const upsertSegmentsSQL = `INSERT INTO segments (task_id, idx, start_ms, end_ms, src_text, pitch_hz, brightness_hz)
	SELECT $1, s.idx, s.start_ms, s.end_ms, s.src_text, s.pitch_hz, s.brightness_hz
	  FROM unnest($2::int[], $3::int[], $4::int[], $5::text[], $6::float8[], $7::float8[])
	       AS s(idx, start_ms, end_ms, src_text, pitch_hz, brightness_hz)
	ON CONFLICT (task_id, idx) DO UPDATE SET
	    start_ms = EXCLUDED.start_ms, end_ms = EXCLUDED.end_ms, src_text = EXCLUDED.src_text,
	    pitch_hz = EXCLUDED.pitch_hz, brightness_hz = EXCLUDED.brightness_hz,
	    mt_text = CASE WHEN segments.src_text = EXCLUDED.src_text THEN segments.mt_text END,
	    tts_audio_key = CASE WHEN segments.src_text = EXCLUDED.src_text AND segments.start_ms = EXCLUDED.start_ms
	        AND segments.end_ms = EXCLUDED.end_ms THEN segments.tts_audio_key END,
	    tts_params_json = CASE WHEN segments.src_text = EXCLUDED.src_text AND segments.start_ms = EXCLUDED.start_ms
	        AND segments.end_ms = EXCLUDED.end_ms THEN segments.tts_params_json END`

// stageSegments replaces the task's segments numbered from base up to end
// (-1: all after base) with segs and their voices in the success
// transaction: segments past the new end of the range (from an earlier,
// longer run) go.
func stageSegments(msg *step.Message, taskID uuid.UUID, segs []speech.Segment, voices []speaker.Voice, base, end int) {
	if end < 0 {
		msg.Exec(`DELETE FROM segments WHERE task_id = $1 AND idx >= $2`, taskID, base+len(segs))
	} else {
		msg.Exec(`DELETE FROM segments WHERE task_id = $1 AND idx >= $2 AND idx < $3`, taskID, base+len(segs), end)
	}
	if len(segs) == 0 {
		return
	}
	idx := make([]int32, len(segs))
	start := make([]int32, len(segs))
	stop := make([]int32, len(segs))
	text := make([]string, len(segs))
	pitch := make([]float64, len(segs))
	bright := make([]float64, len(segs))
	for i, s := range segs {
		idx[i], start[i], stop[i], text[i] = int32(base+i), int32(s.StartMS), int32(s.EndMS), s.Text
		pitch[i], bright[i] = voices[i].PitchHz, voices[i].BrightnessHz
	}
	msg.Exec(upsertSegmentsSQL, taskID, idx, start, stop, text, pitch, bright)
}
