package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/speech"
	"github.com/dubflow/dubflow/pkg/subtitle"
	"github.com/dubflow/dubflow/pkg/wire"
)

// options are one run's settings: the configuration, overridden by the
// task's mux_video options.
type options struct {
	mix  media.MixOptions
	burn bool
}

func (h *handler) options(o *wire.MuxOptions) options {
	out := options{mix: h.cfg.Mix(), burn: h.cfg.BurnSubtitles}
	if o == nil {
		return out
	}
	if o.BackgroundMode != "" {
		out.mix.Background = o.BackgroundMode
	}
	if o.BackgroundDuckDB != nil {
		out.mix.DuckDB = *o.BackgroundDuckDB
	}
	if o.LoudnessLUFS != nil {
		out.mix.LoudnessLUFS = *o.LoudnessLUFS
	}
	if o.BurnSubtitles != nil {
		out.burn = *o.BurnSubtitles
	}
	return out
}

// job is one run of the step, in its temporary folder.
type job struct {
	h                *handler
	p                wire.MuxVideo
	opts             options
	srcLang, dstLang string
	probe            []byte // tasks.source_probe: extract_audio's probe of the video (media.ProbeRecord)
	// burnAs is the task's plan's burn_subtitles: wire.BurnTarget or
	// wire.BurnBilingual writes the extra output final.burned.mp4 with
	// those subtitles drawn in; "" none.
	burnAs string
	segs   []segment
	dir    string
	// video, dubWav and totalMS are the downloaded source, the assembled
	// dub track and the timeline's length, once run has them.
	video, dubWav string
	totalMS       int
	report        *media.TimingReport
	laps          []lap // how long each part of the run took, for the log
	last          time.Time
}

// lap is one part of a run and how long it took.
type lap struct {
	name string
	took time.Duration
}

// lap records that the part of the run named name ended now.
func (j *job) lap(name string) {
	now := time.Now()
	j.laps = append(j.laps, lap{name, now.Sub(j.last)})
	j.last = now
}

// output is a file the step stores.
type output struct{ key, file, contentType string }

// run downloads the video and clips, assembles the dub track, writes the
// subtitles and the timing report, muxes the video and stores it all. It
// returns the task's result.
func (j *job) run(ctx context.Context) (map[string]any, error) {
	cfg := j.h.cfg
	j.last = time.Now()
	video := filepath.Join(j.dir, "source.media")
	if err := blob.Download(ctx, j.h.objects, j.p.SourceVideoKey, video, blob.Need{MaxBytes: cfg.MaxVideoBytes, Setting: "MAX_VIDEO_BYTES"}); err != nil {
		return nil, err
	}
	// The claimed length sizes the dub track: it must be within the limit,
	// and Mux checks the length the streams really have.
	info, err := j.probeVideo(ctx, video, media.Limits{RequireVideo: true, MaxDuration: cfg.MaxDuration()})
	if err != nil {
		return nil, fmt.Errorf("check %s: %w", j.p.SourceVideoKey, j.h.explain(err))
	}
	totalMS := int(info.Duration.Milliseconds())
	j.lap("video")
	dub := filepath.Join(j.dir, "dub.wav")
	j.video, j.dubWav, j.totalMS = video, dub, totalMS
	channels := 0 // no soundtrack
	if audio := info.StreamsOf(media.AudioStream); len(audio) > 0 {
		channels = max(audio[0].Channels, 1)
	}
	if err := j.assemble(ctx, video, channels, totalMS, dub); err != nil {
		return nil, err
	}
	subs, result, err := j.subtitles()
	if err != nil {
		return nil, err
	}
	timing := filepath.Join(j.dir, "timing.json")
	if err := writeFile(timing, j.report.WriteJSON); err != nil {
		return nil, err
	}
	in := j.muxInput(video, dub, subs, info)
	out := filepath.Join(j.dir, "final.mp4")
	if err := media.Mux(ctx, in, out); err != nil {
		return nil, fmt.Errorf("mux %s: %w", j.p.SourceVideoKey, j.h.explain(err))
	}
	j.lap("mux")
	timingKey := path.Dir(j.p.OutputVideoKey) + "/timing.json"
	uploads := append([]output{{j.p.TTSAudioKey, dub, "audio/wav"}}, subs...)
	uploads = append(uploads, output{timingKey, timing, "application/json"}, output{j.p.OutputVideoKey, out, "video/mp4"})
	if j.burnAs != "" {
		burned, err := j.burn(ctx, in, subs)
		if err != nil {
			return nil, err
		}
		uploads = append(uploads, burned)
		result["burned_video_key"] = burned.key
	}
	if err := j.store(ctx, uploads); err != nil {
		return nil, err
	}
	result["output_video_key"], result["dub_audio_key"], result["timing_report_key"] = j.p.OutputVideoKey, j.p.TTSAudioKey, timingKey
	result["segments"], result["duration_ms"], result["timing"], result["mix"] = len(j.segs), totalMS, j.report.Summary, j.report.Mix
	result["burned_subtitles"] = j.opts.burn
	return result, nil
}

// muxInput is what Mux makes the output of: the video, the dub track, the
// target and source subtitles as tracks (and, with the mux options'
// burn_subtitles, the target's drawn into the picture).
func (j *job) muxInput(video, dub string, subs []output, info *media.Info) media.MuxInput {
	in := media.MuxInput{Video: video, DubWav: dub, DubLanguage: j.dstLang, OriginalLanguage: j.srcLang,
		Subtitles: []media.Subtitle{
			{Path: subs[1].file, Language: j.dstLang, Title: "Dub (" + j.dstLang + ")"},
			{Path: subs[0].file, Language: j.srcLang, Title: "Original (" + j.srcLang + ")"},
		},
		MaxDuration: j.h.cfg.MaxDuration(), Info: info}
	if j.opts.burn {
		in.BurnSubtitles = subs[1].file
	}
	return in
}

// store uploads the run's outputs.
func (j *job) store(ctx context.Context, uploads []output) error {
	for _, up := range uploads {
		if err := j.h.objects.PutFile(ctx, up.key, up.file, up.contentType); err != nil {
			return fmt.Errorf("store %s: %w", up.key, err)
		}
	}
	j.lap("store")
	return nil
}

// burn writes the extra output final.burned.mp4: the output of in again,
// with the target subtitles (or the bilingual ones, the dub's lines over
// the source's) drawn into the picture by libass. subs are the outputs of
// subtitles, the bilingual SubRip file among them.
func (j *job) burn(ctx context.Context, in media.MuxInput, subs []output) (output, error) {
	in.BurnSubtitles = subs[1].file // the target's SubRip file
	in.Subtitles = nil              // drawn in: no tracks beside
	if j.burnAs == wire.BurnBilingual {
		for _, s := range subs {
			if strings.HasSuffix(s.key, "-"+j.srcLang+".srt") {
				in.BurnSubtitles = s.file
			}
		}
	}
	out := output{wire.BurnedKey(j.p.OutputVideoKey), filepath.Join(j.dir, "final.burned.mp4"), "video/mp4"}
	if err := media.Mux(ctx, in, out.file); err != nil {
		return out, fmt.Errorf("burn subtitles into %s: %w", j.p.SourceVideoKey, j.h.explain(err))
	}
	j.lap("burn")
	return out, nil
}

// probeVideo describes the downloaded video and checks it against lim:
// with the probe extract_audio recorded when the bytes are the ones it
// probed, else with ffprobe.
func (j *job) probeVideo(ctx context.Context, video string, lim media.Limits) (*media.Info, error) {
	info, _, err := media.ProbeReusing(ctx, video, j.probe, lim)
	return info, err
}

// assemble fits the clips to their slots and mixes the dub track over
// the video's soundtrack of channels (0: none).
func (j *job) assemble(ctx context.Context, video string, channels, totalMS int, dub string) error {
	slots, err := j.h.clips(ctx, j.dir, j.segs)
	if err != nil {
		return err
	}
	j.lap("clips")
	fit := media.FitOptions{MaxSpeedup: j.h.cfg.MaxSpeedup, RescueSpeedup: j.h.cfg.RescueSpeedup, TotalMS: totalMS}
	placements := media.Fit(slots, fit)
	speech := make([]media.Span, 0, len(j.segs))
	for _, s := range j.segs {
		speech = append(speech, media.Span{StartMS: s.startMS, EndMS: s.endMS})
	}
	in := media.DubInput{Placements: placements, Clip: func(idx int) string { return clipPath(j.dir, idx) },
		TotalMS: totalMS, Speech: speech, Mix: j.opts.mix}
	if channels > 0 {
		in.Original, in.OriginalChannels = video, channels
	}
	mix, err := media.AssembleDub(ctx, in, dub)
	if err != nil {
		return fmt.Errorf("assemble the dub of %s: %w", j.p.SourceVideoKey, err)
	}
	j.lap("assemble")
	j.report = media.NewTimingReport(placements, fit)
	j.report.Mix = mix
	return nil
}

// subtitles writes the source, target and bilingual subtitles as SubRip
// and WebVTT beside the output: final.<lang>.srt/.vtt and
// final.<target>-<source>.srt/.vtt. The first two outputs are the source
// and target SRT files.
func (j *job) subtitles() ([]output, map[string]any, error) {
	src := make([]subtitle.Cue, 0, len(j.segs))
	dst := make([]subtitle.Cue, 0, len(j.segs))
	for _, s := range j.segs {
		src = append(src, subtitle.Cue{StartMS: s.startMS, EndMS: s.endMS, Text: s.src})
		dst = append(dst, subtitle.Cue{StartMS: s.startMS, EndMS: s.endMS, Text: s.mt})
	}
	base := path.Dir(j.p.OutputVideoKey) + "/final."
	dstName := j.dstLang
	if dstName == j.srcLang {
		dstName += ".dub"
	}
	both := dstName + "-" + j.srcLang
	var outs []output
	result := map[string]any{}
	for _, f := range []struct {
		name, field string
		cues        []subtitle.Cue
	}{{j.srcLang, j.srcLang, src}, {dstName, j.dstLang, dst}, {both, "bilingual", subtitle.Bilingual(dst, src)}} {
		for _, format := range subtitle.Formats {
			file := filepath.Join(j.dir, f.name+"."+format.Ext())
			if err := writeFile(file, func(w io.Writer) error { return subtitle.Write(w, format, f.cues) }); err != nil {
				return nil, nil, err
			}
			key := base + f.name + "." + format.Ext()
			outs = append(outs, output{key, file, format.ContentType()})
			field := resultFields[format]
			m, _ := result[field].(map[string]string)
			if m == nil {
				m = map[string]string{}
				result[field] = m
			}
			m[f.field] = key
		}
	}
	// outs: src.srt, src.vtt, dst.srt, ...: put the two SRT files first.
	outs[1], outs[2] = outs[2], outs[1]
	return outs, result, nil
}

// resultFields are the fields of the task's result that list the
// subtitles of each format by language.
var resultFields = map[subtitle.Format]string{subtitle.SRT: "subtitles", subtitle.WebVTT: "subtitles_vtt"}

// writeFile creates file and fills it with write.
func writeFile(file string, write func(io.Writer) error) error {
	f, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(file), err)
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", filepath.Base(file), err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(file), err)
	}
	return nil
}

// synthRate reads from a segment's synthesis parameters how much faster
// than its default rate the engine spoke: a remote engine's speed, or
// espeak-ng's words per minute over its default; 1 when neither is there.
func synthRate(params []byte) float64 {
	var p struct {
		Speed   float64 `json:"speed"`
		RateWPM float64 `json:"rate_wpm"`
	}
	if json.Unmarshal(params, &p) != nil {
		return 1
	}
	switch {
	case p.Speed > 0:
		return max(p.Speed, 1)
	case p.RateWPM > 0:
		return max(p.RateWPM/speech.EspeakDefaultWPM, 1)
	}
	return 1
}
