package main

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/admit"
	"github.com/dubflow/dubflow/pkg/admit/admittest"
	"github.com/dubflow/dubflow/pkg/media"
	lifecycle "github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

// putText stores text under key.
func putText(s *testenv.Stack, key, text string) {
	s.T.Helper()
	if err := s.Blob.Put(context.Background(), key, bytes.NewReader([]byte(text)), int64(len(text)), "text/plain"); err != nil {
		s.T.Fatal(err)
	}
}

// segmentRow is a segment as a task from subtitles starts with.
type segmentRow struct {
	Start, End int
	Src        string
	MT         *string
	Speaker    string
}

func segmentRows(s *testenv.Stack, id uuid.UUID) []segmentRow {
	s.T.Helper()
	rows, err := s.DB.Pool.Query(context.Background(), `SELECT start_ms, end_ms, src_text, mt_text, speaker FROM segments
		WHERE task_id = $1 ORDER BY idx`, id)
	if err != nil {
		s.T.Fatal(err)
	}
	defer rows.Close()
	var out []segmentRow
	for rows.Next() {
		var r segmentRow
		if err := rows.Scan(&r.Start, &r.End, &r.Src, &r.MT, &r.Speaker); err != nil {
			s.T.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// subtitlesInTheSource: an outside publisher's task from a source-language
// SRT skips asr — no asr message — and stages the cues as segments (a cue
// without a name keeps the speaker before it), records the plan and emits
// the translate batch.
func subtitlesInTheSource(t *testing.T, s *testenv.Stack) {
	id := uuid.New()
	keys := wire.DefaultKeys(id)
	upload(s, keys.SourceVideo, sample(t, "Hello there. How are you?", media.SampleSpeech))
	key := wire.SubtitlesKey(id, "subtitles", "srt")
	putText(s, key, "1\n00:00:00,100 --> 00:00:00,800\n[Ana] Hello there.\n\n2\n00:00:00,900 --> 00:00:01,500\nHow are you?\n")
	asrBefore := s.Depth("task.asr")
	env, err := wire.New(wire.StepExtractAudio, id, "", wire.ExtractAudio{SourceVideoKey: keys.SourceVideo,
		OutputAudioKey: keys.SourceAudio, SourceLanguage: "en", TargetLanguage: "es", SubtitlesKey: key})
	if err != nil {
		t.Fatal(err)
	}
	s.Expect(t, env, wire.StepExtractAudio, "succeeded", "")
	if n := s.Depth("task.asr") - asrBefore; n != 0 {
		t.Errorf("%d asr messages for a task from subtitles", n)
	}
	want := []segmentRow{{100, 800, "Hello there.", nil, "Ana"}, {900, 1500, "How are you?", nil, "Ana"}}
	if got := segmentRows(s, id); !reflect.DeepEqual(got, want) {
		t.Errorf("segments %+v, want %+v", got, want)
	}
	plan, err := lifecycle.LoadPlan(context.Background(), s.DB.Pool, id)
	if err != nil || !reflect.DeepEqual(plan, lifecycle.Plan{Skipped: []string{"asr"}, SubtitlesKey: key, SubtitlesLanguage: "en"}) {
		t.Errorf("plan %+v, %v", plan, err)
	}
	var p wire.Translate
	s.NextMessage(t, "task.translate", &p)
	if p.TaskID != id || !reflect.DeepEqual(p.SegmentIDs, []string{"seg-0", "seg-1"}) || p.SourceLanguage != "en" || p.TargetLanguage != "es" {
		t.Errorf("translate message %+v", p)
	}
}

// subtitlesInTheTarget: a target-language file skips translate too: its
// lines are the segments' translations (mt_text), the second file's cues
// their source text, and the tts part is emitted at once.
func subtitlesInTheTarget(t *testing.T, s *testenv.Stack) {
	id := uuid.New()
	keys := wire.DefaultKeys(id)
	upload(s, keys.SourceVideo, sample(t, "Hello there. How are you?", media.SampleSpeech))
	key, source := wire.SubtitlesKey(id, "subtitles", "vtt"), wire.SubtitlesKey(id, "source", "srt")
	putText(s, key, "WEBVTT\n\n00:00.100 --> 00:00.800\nHola.\n\n00:00.900 --> 00:01.500\n¿Qué tal?\n")
	putText(s, source, "1\n00:00:00,150 --> 00:00:00,750\nHello there.\n")
	env, err := wire.New(wire.StepExtractAudio, id, "", wire.ExtractAudio{SourceVideoKey: keys.SourceVideo,
		OutputAudioKey: keys.SourceAudio, SourceLanguage: "en", TargetLanguage: "es", SubtitlesKey: key, SubtitlesLanguage: "es",
		SourceSubtitlesKey: source, BurnSubtitles: "target"})
	if err != nil {
		t.Fatal(err)
	}
	s.Expect(t, env, wire.StepExtractAudio, "succeeded", "")
	hola, que := "Hola.", "¿Qué tal?"
	want := []segmentRow{{100, 800, "Hello there.", &hola, ""}, {900, 1500, "", &que, ""}}
	if got := segmentRows(s, id); !reflect.DeepEqual(got, want) {
		t.Errorf("segments %+v, want %+v", got, want)
	}
	var p wire.TTS
	s.NextMessage(t, "task.tts", &p)
	if p.TaskID != id || !reflect.DeepEqual(p.SegmentIDs, []string{"seg-0", "seg-1"}) {
		t.Errorf("tts message %+v", p)
	}
	if plan, err := lifecycle.LoadPlan(context.Background(), s.DB.Pool, id); err != nil || !plan.Skips("translate") || plan.BurnSubtitles != "target" {
		t.Errorf("plan %+v, %v", plan, err)
	}
}

// badSubtitlesRefused runs the doors' table of malformed subtitle files
// (admittest.BadSubtitles) through an outside publisher's payload: each
// task fails on its first attempt with the text every door refuses the
// same file with, and nothing goes to asr, translate or tts. (A burn value
// outside the enum breaks the wire contract first: the schema refuses it.)
func badSubtitlesRefused(t *testing.T, s *testenv.Stack) {
	video := sample(t, "Hello there.", media.SampleSpeech)
	info, err := media.Probe(context.Background(), video)
	if err != nil {
		t.Fatal(err)
	}
	rules := admit.Rules{DefaultSource: "en", DefaultTarget: "es"}
	for _, tc := range admittest.BadSubtitles {
		if tc.Burn != "" {
			continue
		}
		t.Run(tc.Name, func(t *testing.T) {
			want := tc.Refusal(rules, info.Duration)
			id := uuid.New()
			keys := wire.DefaultKeys(id)
			upload(s, keys.SourceVideo, video)
			p := wire.ExtractAudio{SourceVideoKey: keys.SourceVideo, OutputAudioKey: keys.SourceAudio, SourceLanguage: "en",
				TargetLanguage: "es", SubtitlesKey: wire.SubtitlesKey(id, "subtitles", "srt"), SubtitlesLanguage: tc.Language}
			putText(s, p.SubtitlesKey, tc.Subtitles)
			if tc.SourceSubtitles != "" {
				p.SourceSubtitlesKey = wire.SubtitlesKey(id, "source", "srt")
				putText(s, p.SourceSubtitlesKey, tc.SourceSubtitles)
			}
			if tc.Targets != "" {
				p.TargetLanguage, p.TargetLanguages = "", strings.Split(tc.Targets, ",")
			}
			before := s.Depth("task.asr") + s.Depth("task.translate") + s.Depth("task.tts")
			env, err := wire.New(wire.StepExtractAudio, id, "", p)
			if err != nil {
				t.Fatal(err)
			}
			s.Publish(env)
			if got := s.WaitStep(id, wire.StepExtractAudio, "succeeded", "failed"); got != "failed" {
				t.Fatalf("extract_audio %s, want failed", got)
			}
			if _, dl := s.Refused(t, id, want.Error()); dl.Attempt != 1 {
				t.Errorf("dead-lettered at attempt %d, want the first", dl.Attempt)
			}
			if n := s.Depth("task.asr") + s.Depth("task.translate") + s.Depth("task.tts") - before; n != 0 {
				t.Errorf("%d messages on for a refused task", n)
			}
		})
	}
}
