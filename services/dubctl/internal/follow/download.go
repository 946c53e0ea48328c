package follow

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/dubflow/dubflow/services/dubctl/internal/shape"
	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// download is one file wait saves: an object of a task and where it goes;
// language names a parent's video of that language.
type download struct {
	key, path, language string
	limit               int64
	burned              bool // the video with subtitles drawn in
}

// finishDone downloads the outputs of a done task and prints where they
// are.
func finishDone(cmd *cobra.Command, b Backend, t *view.Task, o cli.WaitOptions) error {
	ctx, out := cmd.Context(), cmd.OutOrStdout()
	files, err := downloadsOf(t, o.Output)
	if err != nil {
		return err
	}
	w := waited{Task: t, SubtitlePaths: []string{}}
	for _, f := range files {
		if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
			return fmt.Errorf("save output: %w", err)
		}
		err := b.Fetch(ctx, t, f.key, f.path, f.limit)
		if errors.Is(err, shape.ErrNoObject) && f.limit == maxSubtitleBytes {
			continue // a subtitle of the workers' layout that is not there
		}
		if err != nil {
			return err
		}
		switch {
		case f.limit == maxSubtitleBytes:
			w.SubtitlePaths = append(w.SubtitlePaths, f.path)
		case f.burned:
			w.BurnedPaths = append(w.BurnedPaths, f.path)
		case f.language != "":
			if w.OutputPaths == nil {
				w.OutputPaths = map[string]string{}
			}
			w.OutputPaths[f.language] = f.path
		default:
			w.OutputPath = f.path
		}
	}
	if o.JSON {
		return cli.WriteJSON(out, w)
	}
	if len(files) == 0 {
		fmt.Fprintf(out, "task %s done: no speech found in the video, nothing to dub\n", t.TaskID)
		return nil
	}
	targets := t.TargetLanguage
	if t.IsParent() {
		targets = strings.Join(t.TargetLanguages, ",")
	}
	fmt.Fprintf(out, "task %s done: %d segment(s) dubbed %s→%s\n", t.TaskID, t.Segments.Total, t.SourceLanguage, targets)
	// The subtitles first, the videos last (one per language).
	for _, p := range w.SubtitlePaths {
		fmt.Fprintf(out, "subtitles: %s\n", p)
	}
	for _, p := range w.BurnedPaths {
		fmt.Fprintf(out, "subtitles burned in: %s\n", p)
	}
	for _, f := range files {
		if f.limit != maxSubtitleBytes && !f.burned {
			fmt.Fprintln(out, f.path)
		}
	}
	return nil
}

// maxSubtitleBytes bounds the download of one subtitle file.
const maxSubtitleBytes = 16 << 20

// downloadsOf lists what a done task's outputs are saved as: its video at
// dest (default ./<task_id>.mp4) with its subtitles next to it, or for a
// parent each child's video at dest with the language before the
// extension, with the child's subtitles. A task without speech has none.
func downloadsOf(t *view.Task, dest string) ([]download, error) {
	if t.NoSpeech() {
		return nil, nil
	}
	limit, err := outputLimit()
	if err != nil {
		return nil, err
	}
	if dest == "" {
		dest = t.TaskID.String() + ".mp4"
	}
	if !t.IsParent() {
		if t.OutputVideoKey == "" {
			return nil, nil
		}
		return outputFiles(t.TaskID, t.OutputVideoKey, t.Result, []string{t.TargetLanguage, t.SourceLanguage}, dest, limit)
	}
	var out []download
	for _, c := range t.ChildrenOf() {
		if c.Status != view.Done {
			continue
		}
		files, err := outputFiles(c.TaskID, c.OutputVideoKey, c.Result, []string{c.TargetLanguage, t.SourceLanguage},
			cli.LanguageOutput(dest, t.TaskID, c.TargetLanguage), limit)
		if err != nil {
			return nil, err
		}
		files[0].language = c.TargetLanguage
		out = append(out, files...)
	}
	return out, nil
}

// outputFiles lists one task's video, its subtitle files and its video
// with subtitles burned in (when it has one). The subtitles are the ones
// its result lists (source, target and bilingual; SRT and WebVTT), else
// the workers' layout of SRT files for the languages given; each is saved
// as <dest without extension>.<what follows the object's stem>, e.g.
// dub.es.srt, dub.es-en.vtt or dub.burned.mp4.
func outputFiles(id uuid.UUID, videoKey string, result []byte, langs []string, dest string, limit int64) ([]download, error) {
	out := []download{{key: videoKey, path: dest, limit: limit}}
	res := view.OutputOf(result)
	keys := make([]string, 0, len(res.Subtitles)+len(res.SubtitlesVTT))
	for _, subs := range []map[string]string{res.Subtitles, res.SubtitlesVTT} {
		for _, k := range subs {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		stem := strings.TrimSuffix(videoKey, path.Ext(videoKey))
		for _, l := range langs {
			if l != "" {
				keys = append(keys, stem+"."+l+".srt")
			}
		}
	}
	slices.Sort(keys)
	base := strings.TrimSuffix(dest, filepath.Ext(dest))
	stem := strings.TrimSuffix(path.Base(videoKey), path.Ext(videoKey)) + "."
	for _, key := range keys {
		if err := wire.CheckKey(key, wire.KindOutput, id); err != nil {
			return nil, fmt.Errorf("subtitle key %q: %w", key, err)
		}
		name := strings.TrimPrefix(path.Base(key), stem)
		if !subtitleName.MatchString(name) {
			return nil, fmt.Errorf("subtitle key %q: unexpected file name", key)
		}
		out = append(out, download{key: key, path: base + "." + name, limit: maxSubtitleBytes})
	}
	if key := res.BurnedVideoKey; key != "" {
		if err := wire.CheckKey(key, wire.KindOutput, id); err != nil || key != wire.BurnedKey(videoKey) {
			return nil, fmt.Errorf("burned video key %q: not the output's %s", key, wire.BurnedKey(videoKey))
		}
		out = append(out, download{key: key, path: base + ".burned" + filepath.Ext(dest), limit: limit, burned: true})
	}
	return out, nil
}

// subtitleName is what a subtitle's file name may end in: a language, or
// the target and source of a bilingual file, then .srt or .vtt.
var subtitleName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}(\.[A-Za-z0-9_-]{1,16})?\.(srt|vtt)$`)

// outputLimit bounds the download of a task's output video: the largest
// source video plus the largest audio the workers accept (MAX_VIDEO_BYTES +
// MAX_AUDIO_BYTES, read from the environment like the workers'), more than
// mux_video can write, so that a forged object cannot fill the disk.
func outputLimit() (int64, error) {
	var l config.Limits
	if err := config.Load(config.Environ(), &l); err != nil {
		return 0, err
	}
	return l.MaxVideoBytes + l.MaxAudioBytes, nil
}
