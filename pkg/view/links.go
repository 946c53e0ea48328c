package view

import (
	"context"
	"errors"
	"net/url"
	"path"
	"sort"
	"time"
)

// Presigner signs download links of objects (blob.Presigner).
type Presigner interface {
	PresignGet(ctx context.Context, key string, expiry time.Duration, download string) (*url.URL, error)
}

// SourceVideoPath and DubAudioPath are the console's routes under
// /api/tasks/{id} that serve a task's source video and its dub's audio:
// those objects live where the presign user may not read (videos/, tts/;
// it reads outputs/ only), so their links are these console paths.
const (
	SourceVideoPath = "/source-video"
	DubAudioPath    = "/dub-audio"
)

// SignLinks fills t's links: presigned GET URLs, living expiry, of its
// outputs once dubbed (video, subtitles, timing report), the console paths
// of its source video and dub audio, and those of each of its children
// that is done. The
// console's GET /api/tasks/{id} and dubctl's database mode both sign them
// here, with the same settings, so that both show the same links. A link
// that cannot be signed stays null; the errors are returned joined, for
// the caller to log.
func SignLinks(ctx context.Context, p Presigner, t *Task, expiry time.Duration) error {
	s := signer{ctx: ctx, p: p, expiry: expiry}
	t.Links = s.outputLinks(OutputOf(t.Result))
	id := t.TaskID.String()
	t.Links.Source = taskFileLink(id, t.SourceVideoKey, SourceVideoPath)
	t.Links.DubAudio = taskFileLink(id, OutputOf(t.Result).DubAudioKey, DubAudioPath)
	for i := range t.ChildrenOf() {
		c := &t.Languages.Children[i]
		if c.Status != Done {
			continue
		}
		l := s.outputLinks(OutputOf(c.Result))
		c.Links = ChildLinks{Output: l.Output, Subtitles: l.Subtitles, Burned: l.Burned}
	}
	return errors.Join(s.errs...)
}

// signer signs one task's links and keeps what failed.
type signer struct {
	ctx    context.Context
	p      Presigner
	expiry time.Duration
	errs   []error
}

// outputLinks signs the outputs a result names, the subtitles in the
// order of their languages.
func (s *signer) outputLinks(res Output) Links {
	l := Links{Subtitles: []SubtitleLink{}}
	l.Output = s.sign(res.OutputVideoKey)
	l.TimingReport = s.sign(res.TimingReportKey)
	l.Burned = s.sign(res.BurnedVideoKey)
	langs := make([]string, 0, len(res.Subtitles))
	for lang := range res.Subtitles {
		langs = append(langs, lang)
	}
	for lang := range res.SubtitlesVTT {
		if _, ok := res.Subtitles[lang]; !ok {
			langs = append(langs, lang)
		}
	}
	sort.Strings(langs)
	for _, lang := range langs {
		for _, f := range []struct {
			format string
			keys   map[string]string
		}{{"srt", res.Subtitles}, {"vtt", res.SubtitlesVTT}} {
			key := f.keys[lang]
			if u := s.sign(key); u != nil {
				l.Subtitles = append(l.Subtitles, SubtitleLink{Language: lang, Format: f.format, Key: key, URL: *u})
			}
		}
	}
	return l
}

// sign returns a download link for key (saved under its base name), nil
// for no key or one that could not be signed.
func (s *signer) sign(key string) *string {
	if key == "" {
		return nil
	}
	u, err := s.p.PresignGet(s.ctx, key, s.expiry, path.Base(key))
	if err != nil {
		s.errs = append(s.errs, err)
		return nil
	}
	v := u.String()
	return &v
}

// taskFileLink is the console's path of a task file, nil when the task has
// no such object.
func taskFileLink(id, key, file string) *string {
	if key == "" {
		return nil
	}
	p := "/api/tasks/" + id + file
	return &p
}
