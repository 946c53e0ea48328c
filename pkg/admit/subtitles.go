package admit

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/subtitle"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

// Limits of a task's subtitle files.
const (
	// MaxSubtitlesBytes bounds a subtitle file (hours of dialogue).
	MaxSubtitlesBytes = 1 << 20
	// MaxSubtitleCues bounds its cues.
	MaxSubtitleCues = 10000
)

// The fields of a subtitle refusal, the same at every door (the console's
// fields subtitles, subtitlesLanguage, sourceSubtitles, burnSubtitles;
// dubctl's --subtitles FILE[:LANG], --source-subtitles, --burn-subtitles;
// the payload's subtitles_key, subtitles_language, source_subtitles_key,
// burn_subtitles).
const (
	FieldSubtitles       = "subtitles"
	FieldSourceSubtitles = "source subtitles"
	FieldBurnSubtitles   = "burn subtitles"
)

// Subtitles are a task's admitted subtitle files: the cues it starts from
// instead of recognising the speech.
type Subtitles struct {
	// Language is the file's: the task's source language (asr is skipped)
	// or its one target language (asr and translate are skipped).
	Language string
	// Text is the file as it was given, Format what Detect read it as.
	Text   string
	Format subtitle.Format
	Cues   []subtitle.Cue
	// SourceText, beside a target-language file, is the second file with
	// the source text ("" for none), read as SourceFormat.
	SourceText   string
	SourceFormat subtitle.Format
}

// File is a subtitle file a door stores before it creates the task.
type File struct {
	Key, Text, ContentType string
}

// SubtitlesFile reads a subtitle file (dubctl's --subtitles) as the text of
// Request.Subtitles: "" for path "", at most MaxSubtitlesBytes (more is
// refused as TooLarge without reading on). field names the file in a
// refusal (FieldSubtitles or FieldSourceSubtitles).
func SubtitlesFile(field, path string) (string, error) {
	if path == "" {
		return "", nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", &Error{Field: field, Reason: "cannot read the file", Kind: Invalid, Err: err}
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxSubtitlesBytes+1))
	if err != nil {
		return "", &Error{Field: field, Reason: "cannot read the file", Kind: Invalid, Err: err}
	}
	return SubtitlesText(field, b)
}

// SubtitlesText is a subtitle file a door received (a form's file part,
// dubctl's file) as the text of Request.Subtitles or SourceSubtitles: an
// empty file — which would read as no file at all — and one over
// MaxSubtitlesBytes are refused here, with the texts Check gives.
func SubtitlesText(field string, b []byte) (string, error) {
	if len(b) == 0 {
		return "", refuse(field, "", (&subtitle.Error{Reason: subtitle.ReasonEmpty}).Error())
	}
	return string(b), checkSubtitlesSize(field, len(b))
}

// checkSubtitlesSize refuses a file over MaxSubtitlesBytes.
func checkSubtitlesSize(field string, n int) error {
	if n > MaxSubtitlesBytes {
		return &Error{Field: field, Reason: fmt.Sprintf("more than %d bytes", MaxSubtitlesBytes), Kind: TooLarge}
	}
	return nil
}

// ReadSubtitles parses a subtitle file (SubRip or WebVTT) by pkg/subtitle's
// rules: a refusal names its line ("subtitles: line 12: …"). videoMS, when
// > 0, is the video's length: a cue that ends after it is refused.
// extract_audio calls it for the files an outside publisher stored; Check
// and Task.FitVideo for the doors'.
func ReadSubtitles(field string, data []byte, videoMS int) ([]subtitle.Cue, error) {
	if err := checkSubtitlesSize(field, len(data)); err != nil {
		return nil, err
	}
	cues, err := subtitle.Parse(data, subtitle.Limits{DurationMS: videoMS, MaxCues: MaxSubtitleCues})
	if err != nil {
		var e *subtitle.Error
		if errors.As(err, &e) {
			return nil, &Error{Field: field, Reason: e.Error(), Kind: Invalid, Err: err}
		}
		return nil, &Error{Field: field, Reason: err.Error(), Kind: Invalid, Err: err}
	}
	return cues, nil
}

// SubtitlesLanguage settles the language of a task's subtitle file: lang,
// or the source when lang is empty. It must be the source or the task's
// target, and a task from subtitles dubs into one language. hasSource says
// whether a second file gives the source text, which only a file in the
// target language needs.
func SubtitlesLanguage(lang, source string, targets []string, hasSource bool) (string, error) {
	if len(targets) > 1 {
		return "", refuse(FieldSubtitles, "", fmt.Sprintf("a task from subtitles dubs into one language, not %d (submit one task per language)",
			len(targets)))
	}
	if lang == "" {
		lang = source
	}
	if err := checkLanguage(FieldSubtitles, lang); err != nil {
		return "", err
	}
	switch {
	case len(targets) == 1 && lang == targets[0]:
		return lang, nil
	case lang != source:
		return "", refuse(FieldSubtitles, "", fmt.Sprintf("language %s is neither the source (%s) nor the target (%s)",
			lang, source, strings.Join(targets, ",")))
	case hasSource:
		return "", refuse(FieldSourceSubtitles, "", fmt.Sprintf("the source text of subtitles in the target language; these are in the source language (%s)", source))
	}
	return lang, nil
}

// checkSubtitles admits a request's subtitle files (nil for none): their
// language (SubtitlesLanguage) and their cues, as far as they can be
// judged without the video (FitVideo judges the rest).
func checkSubtitles(req Request, source string, targets []string) (*Subtitles, error) {
	if req.Subtitles == "" {
		switch {
		case req.SourceSubtitles != "":
			return nil, refuse(FieldSourceSubtitles, "", "no subtitles to give the source text of")
		case req.SubtitlesLanguage != "":
			return nil, refuse(FieldSubtitles, "", fmt.Sprintf("language %s given without a subtitle file", req.SubtitlesLanguage))
		}
		return nil, nil
	}
	lang, err := SubtitlesLanguage(strings.TrimSpace(req.SubtitlesLanguage), source, targets, req.SourceSubtitles != "")
	if err != nil {
		return nil, err
	}
	s := &Subtitles{Language: lang, Text: req.Subtitles, Format: subtitle.Detect([]byte(req.Subtitles))}
	if s.Cues, err = ReadSubtitles(FieldSubtitles, []byte(s.Text), 0); err != nil {
		return nil, err
	}
	if req.SourceSubtitles != "" {
		s.SourceText, s.SourceFormat = req.SourceSubtitles, subtitle.Detect([]byte(req.SourceSubtitles))
		if _, err := ReadSubtitles(FieldSourceSubtitles, []byte(s.SourceText), 0); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// checkBurn admits a request's burnSubtitles: "", wire.BurnTarget or
// wire.BurnBilingual.
func checkBurn(v string) (string, error) {
	switch v = strings.TrimSpace(v); v {
	case "", wire.BurnTarget, wire.BurnBilingual:
		return v, nil
	}
	return "", refuse(FieldBurnSubtitles, v, fmt.Sprintf("want %s or %s", wire.BurnTarget, wire.BurnBilingual))
}

// FitVideo checks the task's subtitle files against its video's length d:
// a cue that ends after the video is refused with its line. A task without
// subtitles, or a length unknown (0), passes.
func (t Task) FitVideo(d time.Duration) error {
	if t.Subtitles == nil || d <= 0 {
		return nil
	}
	ms := DurationMS(d)
	if _, err := ReadSubtitles(FieldSubtitles, []byte(t.Subtitles.Text), ms); err != nil {
		return err
	}
	if t.Subtitles.SourceText != "" {
		if _, err := ReadSubtitles(FieldSourceSubtitles, []byte(t.Subtitles.SourceText), ms); err != nil {
			return err
		}
	}
	return nil
}

// DurationMS is a video's length d in whole milliseconds, rounded up: the
// end no cue may pass.
func DurationMS(d time.Duration) int { return int((d + time.Millisecond - 1) / time.Millisecond) }

// SubtitleFiles are the files the door stores for task id before it
// creates it, at the keys its Payload names: the subtitles as they were
// given, and the source text's second file.
func (t Task) SubtitleFiles(id uuid.UUID) []File {
	s := t.Subtitles
	if s == nil {
		return nil
	}
	files := []File{{wire.SubtitlesKey(id, "subtitles", s.Format.Ext()), s.Text, s.Format.ContentType()}}
	if s.SourceText != "" {
		files = append(files, File{wire.SubtitlesKey(id, "source", s.SourceFormat.Ext()), s.SourceText, s.SourceFormat.ContentType()})
	}
	return files
}

// Skipped returns the steps the admitted task leaves out (its plan): none
// without subtitles, asr for subtitles in the source language, asr and
// translate for subtitles in the target language.
func (t Task) Skipped() []string {
	if t.Subtitles == nil {
		return nil
	}
	return wire.SkippedBySubtitles(t.Subtitles.Language, t.Source)
}
