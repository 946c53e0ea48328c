package main

import (
	"context"
	"encoding/json"
	"path"
	"sort"

	"github.com/dubflow/dubflow/pkg/consoleapi"
)

// links are presigned GET URLs of a task's objects.
type links struct {
	Source       *string        `json:"source"`
	Output       *string        `json:"output"`
	DubAudio     *string        `json:"dubAudio"`
	Subtitles    []subtitleLink `json:"subtitles"`
	TimingReport *string        `json:"timingReport"`
}

// subtitleLink is one subtitle file.
type subtitleLink = consoleapi.SubtitleLink

// result is what mux_video records as a done task's result.
type result struct {
	OutputVideoKey  string            `json:"output_video_key"`
	DubAudioKey     string            `json:"dub_audio_key"`
	Subtitles       map[string]string `json:"subtitles"`
	TimingReportKey string            `json:"timing_report_key"`
}

// links presigns the task's source and, once dubbed, its outputs, and reads
// its timing report (null when there is none or it is unreadable).
func (s *server) links(ctx context.Context, d *taskDetail) (links, json.RawMessage) {
	var res result
	if len(d.Result) == 0 || json.Unmarshal(d.Result, &res) != nil {
		return links{Subtitles: []subtitleLink{}, Source: s.presign(ctx, d.SourceVideoKey)}, nil
	}
	l, report := s.resultLinks(ctx, res, true)
	l.Source = s.presign(ctx, d.SourceVideoKey)
	return l, report
}

// resultLinks presigns the outputs a result names and, when readReport is
// set, reads its timing report.
func (s *server) resultLinks(ctx context.Context, res result, readReport bool) (links, json.RawMessage) {
	l := links{Subtitles: []subtitleLink{}}
	l.Output = s.presign(ctx, res.OutputVideoKey)
	l.DubAudio = s.presign(ctx, res.DubAudioKey)
	l.TimingReport = s.presign(ctx, res.TimingReportKey)
	langs := make([]string, 0, len(res.Subtitles))
	for lang := range res.Subtitles {
		langs = append(langs, lang)
	}
	sort.Strings(langs)
	for _, lang := range langs {
		if u := s.presign(ctx, res.Subtitles[lang]); u != nil {
			l.Subtitles = append(l.Subtitles, subtitleLink{Language: lang, URL: *u})
		}
	}
	var report json.RawMessage
	if readReport && res.TimingReportKey != "" {
		if b, err := s.objects.Get(ctx, res.TimingReportKey, maxTimingReportBytes); err == nil && json.Valid(b) {
			report = b
		}
	}
	return l, report
}

// presign returns a download link for key, nil for no key.
func (s *server) presign(ctx context.Context, key string) *string {
	if key == "" {
		return nil
	}
	u, err := s.signer.PresignGet(ctx, key, s.cfg.Presign(), path.Base(key))
	if err != nil {
		s.log.Warn().Err(err).Str("key", key).Msg("presign")
		return nil
	}
	v := u.String()
	return &v
}
