package main

import (
	"os"

	"github.com/dubflow/dubflow/pkg/segment"
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

// stageSegments replaces the task's segments numbered from base up to end
// (-1: all after base) with segs and their voices in the success
// transaction: segments past the new end of the range (from an earlier,
// longer run) go (segment.Transcribed).
func stageSegments(msg *step.Message, taskID uuid.UUID, segs []speech.Segment, voices []speaker.Voice, base, end int) {
	rows := make([]segment.Row, len(segs))
	for i, s := range segs {
		rows[i] = segment.Row{StartMS: s.StartMS, EndMS: s.EndMS, Source: s.Text,
			PitchHz: voices[i].PitchHz, BrightnessHz: voices[i].BrightnessHz}
	}
	for _, st := range segment.Transcribed(taskID, base, end, rows) {
		msg.Exec(st.SQL, st.Args...)
	}
}
