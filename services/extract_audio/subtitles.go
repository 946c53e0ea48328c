package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/dubflow/dubflow/pkg/admit"
	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/segment"
	"github.com/dubflow/dubflow/pkg/speaker"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/subtitle"
	lifecycle "github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/rs/zerolog"
)

// line is one segment a task from subtitles starts with.
type line struct {
	startMS, endMS int
	src, mt        string // mt: the text spoken as it is (subtitles in the target language); "" otherwise
	speaker        string
}

// readSubtitles downloads the task's subtitle files and parses them by the
// doors' rules (admit.ReadSubtitles), against the video's length videoMS:
// a file that breaks them fails the task permanently with the text a door
// refuses it with. It returns the task's lines.
func (h *handler) readSubtitles(ctx context.Context, p wire.ExtractAudio, target bool, videoMS int) ([]line, error) {
	cues, err := h.readCues(ctx, admit.FieldSubtitles, p.SubtitlesKey, videoMS)
	if err != nil {
		return nil, err
	}
	var source []subtitle.Cue
	if p.SourceSubtitlesKey != "" {
		if source, err = h.readCues(ctx, admit.FieldSourceSubtitles, p.SourceSubtitlesKey, videoMS); err != nil {
			return nil, err
		}
	}
	named := slices.ContainsFunc(cues, func(c subtitle.Cue) bool { return c.Speaker != "" })
	lines := make([]line, len(cues))
	who := ""
	for i, c := range cues {
		if c.Speaker != "" || who == "" {
			who = c.Speaker
		}
		l := line{startMS: c.StartMS, endMS: c.EndMS, src: c.Text}
		if named {
			// A line without a name, in a file that names its speakers,
			// is the speaker before it still talking (the first names
			// the first speaker named).
			l.speaker = cmp.Or(who, firstSpeaker(cues))
		}
		if target {
			l.src, l.mt = sourceText(source, c), c.Text
		}
		lines[i] = l
	}
	return lines, nil
}

// readCues downloads one subtitle file, at most admit.MaxSubtitlesBytes,
// and parses it.
func (h *handler) readCues(ctx context.Context, field, key string, videoMS int) ([]subtitle.Cue, error) {
	data, err := h.objects.Get(ctx, key, admit.MaxSubtitlesBytes+1)
	switch {
	case errors.Is(err, blob.ErrNotFound):
		return nil, fault.Permanent(fmt.Errorf("%s: %s not found in storage", field, key))
	case errors.Is(err, blob.ErrTooLarge):
		data = make([]byte, admit.MaxSubtitlesBytes+1) // refused for its size below, as at the doors
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	cues, err := admit.ReadSubtitles(field, data, videoMS)
	if err != nil {
		return nil, fault.Permanent(err)
	}
	return cues, nil
}

// firstSpeaker is the first speaker the cues name.
func firstSpeaker(cues []subtitle.Cue) string {
	for _, c := range cues {
		if c.Speaker != "" {
			return c.Speaker
		}
	}
	return ""
}

// sourceText is the text of the source cues whose middle falls within c,
// joined with spaces: the source of a line given in the target language.
func sourceText(source []subtitle.Cue, c subtitle.Cue) string {
	var out string
	for _, s := range source {
		if mid := (s.StartMS + s.EndMS) / 2; mid >= c.StartMS && mid < c.EndMS {
			if out != "" {
				out += " "
			}
			out += s.Text
		}
	}
	return out
}

// measure returns the voice asr would have measured in each line of the
// audio in wav (pitch and brightness), so that tts gives each speaker a
// voice of its register; when the file cannot be measured every voice is
// unknown and the reason is logged.
func measure(wav string, lines []line, log zerolog.Logger) []speaker.Voice {
	voices := make([]speaker.Voice, len(lines))
	spans := make([]speaker.Span, len(lines))
	for i, l := range lines {
		spans[i] = speaker.Span{StartMS: l.startMS, EndMS: l.endMS}
	}
	f, err := os.Open(wav)
	if err == nil {
		defer f.Close()
		var got []speaker.Voice
		if got, err = speaker.Measure(f, spans); err == nil {
			return got
		}
	}
	log.Warn().Err(err).Msg("voices not measured: the speakers' registers are unknown")
	return voices
}

// stageLines stages the task's lines as its segments, numbered from 0, in
// the success transaction (segment.Subtitled). A target-language line's
// text is its translation already (mt_text); a source-language one waits
// for translate (mt_text NULL).
func stageLines(msg *step.Message, lines []line, voices []speaker.Voice, target bool) {
	rows := make([]segment.Row, len(lines))
	for i, l := range lines {
		rows[i] = segment.Row{StartMS: l.startMS, EndMS: l.endMS, Source: l.src, Speaker: l.speaker,
			PitchHz: voices[i].PitchHz, BrightnessHz: voices[i].BrightnessHz}
		if target {
			rows[i].Text = &lines[i].mt
		}
	}
	for _, st := range segment.Subtitled(msg.Envelope.TaskID, rows) {
		msg.Exec(st.SQL, st.Args...)
	}
}

// emitLines stages the messages that carry the lines on: the translate
// batches (subtitles in the source language), or straight the tts parts of
// the same batches (in the target language: translate is skipped). tts
// emits mux_video once every part is done (asr and translate count as done:
// the plan skips them).
func (h *handler) emitLines(msg *step.Message, t task, n int, target bool) error {
	id := msg.Envelope.TaskID
	ids := make([]string, n)
	for i := range ids {
		ids[i] = wire.SegmentID(i)
	}
	for batch := range slices.Chunk(ids, h.cfg.TranslateBatchSize) {
		var err error
		if target {
			err = msg.Emit(wire.StepTTS, wire.TTS{TaskID: id, SpeakerID: t.speakerID, SegmentIDs: batch})
		} else {
			err = msg.Emit(wire.StepTranslate, wire.Translate{TaskID: id, SegmentIDs: batch, SourceLanguage: t.sourceLanguage,
				TargetLanguage: t.targetLanguage, BatchSize: h.cfg.TranslateBatchSize})
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// fromSubtitles carries a task from subtitles on after its audio is
// extracted: its lines (read by extract) staged as segments with the
// voices measured in the audio, and the next messages emitted.
func (h *handler) fromSubtitles(msg *step.Message, t task, p wire.ExtractAudio, x extracted) error {
	plan := lifecycle.PlanOf(p, t.sourceLanguage)
	target := plan.Skips(wire.StepTranslate)
	stageLines(msg, x.lines, measure(x.wav, x.lines, msg.Log), target)
	msg.Log.Info().Int("segments", len(x.lines)).Str("subtitles_language", plan.SubtitlesLanguage).
		Strs("skipped", plan.Skipped).Msg("segments from subtitles")
	if stage := reviewStage(p.Review, target); stage != "" {
		// The lines wait for a person's edits; the approval sends them on
		// (pkg/dub's Approve), as after asr.
		msg.Apply(lifecycle.Hold(lifecycle.RefOf(msg.Envelope), stage))
		return nil
	}
	return h.emitLines(msg, t, len(x.lines), target)
}

// reviewStage is the stage a task from subtitles stops at for review at
// once ("" for none): the transcript's, when asked, for subtitles in the
// source language; for subtitles in the target language, whose lines are
// translations already, the translation's, whichever stage was asked. A
// task from source-language subtitles reviewing only its translation
// stops after translate, as any task does.
func reviewStage(review []string, target bool) string {
	switch {
	case len(review) == 0:
		return ""
	case target:
		return lifecycle.StageTranslation
	case slices.Contains(review, wire.ReviewTranscript):
		return lifecycle.StageTranscript
	}
	return ""
}
