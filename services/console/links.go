package main

import (
	"context"
	"path"
	"sort"

	"github.com/dubflow/dubflow/pkg/view"
)

// links are presigned GET URLs of a task's objects.
type links = view.Links

// subtitleLink is one subtitle file.
type subtitleLink = view.SubtitleLink

// linksOf presigns, once dubbed, the task's outputs and those of each of
// its children that is done; the source video and the dub's audio, which
// the presign user may not read, are console paths (taskfiles.go).
func (s *server) linksOf(ctx context.Context, d *taskDetail) {
	d.Links = s.outputLinks(ctx, view.OutputOf(d.Result))
	id := d.TaskID.String()
	d.Links.Source = taskFileLink(id, d.SourceVideoKey, sourceVideoPath)
	d.Links.DubAudio = taskFileLink(id, view.OutputOf(d.Result).DubAudioKey, dubAudioPath)
	for i := range d.ChildrenOf() {
		c := &d.Languages.Children[i]
		if c.Status != view.Done {
			continue
		}
		l := s.outputLinks(ctx, view.OutputOf(c.Result))
		c.Links = view.ChildLinks{Output: l.Output, Subtitles: l.Subtitles}
	}
}

// outputLinks presigns the outputs a result names (under outputs/).
func (s *server) outputLinks(ctx context.Context, res view.Output) links {
	l := links{Subtitles: []subtitleLink{}}
	l.Output = s.presign(ctx, res.OutputVideoKey)
	l.TimingReport = s.presign(ctx, res.TimingReportKey)
	langs := make([]string, 0, len(res.Subtitles))
	for lang := range res.Subtitles {
		langs = append(langs, lang)
	}
	sort.Strings(langs)
	for _, lang := range langs {
		key := res.Subtitles[lang]
		if u := s.presign(ctx, key); u != nil {
			l.Subtitles = append(l.Subtitles, subtitleLink{Language: lang, Key: key, URL: *u})
		}
	}
	return l
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
