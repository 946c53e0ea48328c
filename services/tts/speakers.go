package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	seg "github.com/dubflow/dubflow/pkg/segment"
	"github.com/dubflow/dubflow/pkg/speaker"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/jackc/pgx/v5"
)

// voicing is how tts gives speakers voices.
type voicing struct {
	// maxSpeakers bounds the speakers told apart (1: one voice for all).
	maxSpeakers int
	voices      speaker.Voices
}

// assignSpeakers gives a speaker and a voice to the task's segments that
// have none yet, from the voices asr measured in them, and records them in
// one statement (all or nothing, so a crash leaves none). The task's own
// voice (speaker_id) goes to the first speaker.
//
// A task's tts parts start as their translate batches finish, while later
// chunks are still transcribed: the first part tells the speakers apart
// among the segments known then (speaker.Cluster), later ones put the new
// segments with those speakers or make new ones (speaker.Extend). Parts
// take turns under a lock of the task held in a transaction, so that two
// never number the same new speaker twice. only names the part's segments
// (nil: the whole task); a part whose segments all have a speaker takes no
// lock.
func (h *handler) assignSpeakers(ctx context.Context, msg *step.Message, t task, only []int32) error {
	var missing bool
	if err := h.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM segments WHERE task_id = $1 AND (speaker = '' OR voice = '')
		AND ($2::int[] IS NULL OR idx = ANY($2)))`, t.id, only).Scan(&missing); err != nil {
		return fmt.Errorf("read speakers of %s: %w", t.id, err)
	}
	if !missing {
		return nil
	}
	return pgx.BeginFunc(ctx, h.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('speakers/' || $1::text, 0))`, t.id); err != nil {
			return fmt.Errorf("lock speakers of %s: %w", t.id, err)
		}
		return h.assignSpeakersTx(ctx, tx, msg, t)
	})
}

// known is what assignSpeakersTx reads of one segment.
type known struct {
	idx            int32
	speaker, voice string
	voiced         speaker.Voice
}

// assignSpeakersTx is assignSpeakers inside tx, under the task's lock: it
// extends the speakers over every segment known now.
func (h *handler) assignSpeakersTx(ctx context.Context, tx pgx.Tx, msg *step.Message, t task) error {
	rows, err := tx.Query(ctx, `SELECT idx, speaker, voice, pitch_hz, brightness_hz FROM segments
		WHERE task_id = $1 ORDER BY idx`, t.id)
	if err != nil {
		return fmt.Errorf("read segments of %s: %w", t.id, err)
	}
	segs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (known, error) {
		var k known
		return k, r.Scan(&k.idx, &k.speaker, &k.voice, &k.voiced.PitchHz, &k.voiced.BrightnessHz)
	})
	if err != nil {
		return fmt.Errorf("read segments of %s: %w", t.id, err)
	}
	if err := h.voiceNamed(ctx, tx, msg, t, segs); err != nil {
		return err
	}
	voices := make([]speaker.Voice, len(segs))
	speakers := make([]string, len(segs))
	given := map[string]string{}
	newOnes := 0
	for i, s := range segs {
		if h.voicing.maxSpeakers > 1 {
			voices[i] = s.voiced // one voice for all: the first of the low register, as ever
		}
		speakers[i] = s.speaker
		if s.speaker == "" {
			newOnes++
		} else if _, ok := given[s.speaker]; !ok {
			given[s.speaker] = s.voice
		}
	}
	if newOnes == 0 {
		return nil
	}
	turns := speaker.Extend(voices, speakers, max(1, h.voicing.maxSpeakers))
	byName := speaker.AssignMore(turns, given, h.voicing.voices, strings.ToLower(t.language), t.speaker)
	idx, names, chosen := make([]int32, 0, newOnes), make([]string, 0, newOnes), make([]string, 0, newOnes)
	for i, tr := range turns {
		if segs[i].speaker == "" {
			idx, names, chosen = append(idx, segs[i].idx), append(names, tr.Speaker), append(chosen, byName[tr.Speaker])
		}
	}
	msg.Log.Info().Int("segments", newOnes).Int("speakers", len(byName)).Interface("voices", byName).Msg("speakers found")
	if err := seg.SpeakersFound(ctx, tx, t.id, idx, names, chosen); err != nil {
		return fmt.Errorf("record speakers of %s: %w", t.id, err)
	}
	return nil
}

// voiceNamed gives a voice to the speakers a person's subtitles named
// (segments with a speaker and no voice yet: a task from subtitles), in
// order of appearance, each the next voice of its register — the median
// pitch of its segments, as for recognised speakers — not taken by a
// speaker voiced before; the task's own voice goes to the first. segs get
// their voices too.
func (h *handler) voiceNamed(ctx context.Context, tx pgx.Tx, msg *step.Message, t task, segs []known) error {
	given := map[string]string{}
	pitches := map[string][]float64{}
	var order []string
	for _, s := range segs {
		switch {
		case s.speaker == "":
		case s.voice != "":
			given[s.speaker] = s.voice
		default:
			if _, seen := pitches[s.speaker]; !seen {
				order, pitches[s.speaker] = append(order, s.speaker), nil
			}
			if s.voiced.PitchHz > 0 {
				pitches[s.speaker] = append(pitches[s.speaker], s.voiced.PitchHz)
			}
		}
	}
	var turns []speaker.Turn
	for _, name := range order {
		if _, ok := given[name]; !ok {
			turns = append(turns, speaker.Turn{Speaker: name, PitchHz: median(pitches[name])})
		}
	}
	if len(turns) == 0 {
		return nil
	}
	byName := speaker.AssignMore(turns, given, h.voicing.voices, strings.ToLower(t.language), t.speaker)
	names, chosen := make([]string, 0, len(turns)), make([]string, 0, len(turns))
	for _, tr := range turns {
		names, chosen = append(names, tr.Speaker), append(chosen, byName[tr.Speaker])
	}
	for i := range segs {
		if segs[i].speaker != "" && segs[i].voice == "" {
			segs[i].voice = byName[segs[i].speaker]
		}
	}
	msg.Log.Info().Int("speakers", len(turns)).Interface("voices", byName).Msg("named speakers voiced")
	if err := seg.VoicesNamed(ctx, tx, t.id, names, chosen); err != nil {
		return fmt.Errorf("record voices of %s: %w", t.id, err)
	}
	return nil
}

// median is the middle of values (the mean of the two middle ones), 0 for
// none.
func median(values []float64) float64 {
	if len(values) == 0 {
		return 0
	}
	v := slices.Clone(values)
	slices.Sort(v)
	if n := len(v); n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2
	}
	return v[len(v)/2]
}
