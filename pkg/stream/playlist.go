package stream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// The stream's files under outputs/{task_id}/stream/: the multivariant
// playlist players open, the media playlist of the video (with the dub as
// its sound) and the subtitles' playlist.
const (
	MasterName    = "index.m3u8"
	VideoName     = "video.m3u8"
	SubtitlesName = "subtitles.m3u8"
)

// Dir is the folder of a task's stream in the object store.
func Dir(outputVideoKey string) string { return path.Dir(outputVideoKey) + "/stream/" }

// Names says where a playlist's references point: URI returns the address
// of an object (a piece, an init segment, a subtitles file) and Video and
// Subtitles those of the media playlists.
type Names struct {
	URI       func(key string) string
	Video     string
	Subtitles string
}

// Relative are the names the stored playlists of output version v use:
// every file of the stream sits beside them (a re-dub's named after
// v<n>-), and a re-dub's media playlists are new files (video-v2.m3u8), so
// that a player that reloads the multivariant playlist sees the new lines
// while the earlier EVENT playlists never change what they listed.
func Relative(dir string, v int) Names {
	return Names{URI: func(key string) string { return strings.TrimPrefix(key, dir) },
		Video: versioned(VideoName, v), Subtitles: versioned(SubtitlesName, v)}
}

// versioned names a media playlist of output version v.
func versioned(name string, v int) string {
	if v <= 1 {
		return name
	}
	return fmt.Sprintf("%s-v%d.m3u8", strings.TrimSuffix(name, ".m3u8"), v)
}

// Master writes the multivariant playlist: one variant (the video with the
// dub; codecs as the init segment gives them, "" to leave them out) and
// its subtitles in language.
func Master(n Names, codecs, language string) string {
	var b strings.Builder
	b.WriteString("#EXTM3U\n#EXT-X-VERSION:7\n#EXT-X-INDEPENDENT-SEGMENTS\n")
	fmt.Fprintf(&b, "#EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID=\"subs\",NAME=%q,LANGUAGE=%q,DEFAULT=YES,AUTOSELECT=YES,URI=%q\n",
		"Dub ("+language+")", language, n.Subtitles)
	b.WriteString("#EXT-X-STREAM-INF:BANDWIDTH=1500000")
	if codecs != "" {
		fmt.Fprintf(&b, ",CODECS=%q", codecs)
	}
	b.WriteString(",SUBTITLES=\"subs\"\n")
	b.WriteString(n.Video + "\n")
	return b.String()
}

// Video writes the media playlist of st: an EVENT playlist that only
// grows, each batch's pieces in order (an init segment named again where a
// batch needs another), ended by #EXT-X-ENDLIST when ended (the stream is
// whole, or the task ended otherwise: cancelled, failed).
func Video(st *State, n Names, ended bool) string {
	var b strings.Builder
	head(&b, targetDuration(st))
	mapKey := ""
	for _, bt := range st.Batches {
		if bt.MapKey != mapKey {
			fmt.Fprintf(&b, "#EXT-X-MAP:URI=%q\n", n.URI(bt.MapKey))
			mapKey = bt.MapKey
		}
		for _, p := range bt.Pieces {
			fmt.Fprintf(&b, "#EXTINF:%.3f,\n%s\n", float64(p.DurationMS)/1000, n.URI(p.Key))
		}
	}
	if ended {
		b.WriteString("#EXT-X-ENDLIST\n")
	}
	return b.String()
}

// Subtitles writes the subtitles' media playlist of st: one WebVTT file a
// batch, as long as the batch.
func Subtitles(st *State, n Names, ended bool) string {
	var b strings.Builder
	longest := 0
	for _, bt := range st.Batches {
		longest = max(longest, bt.ToMS-bt.FromMS)
	}
	head(&b, int(math.Ceil(float64(longest)/1000)))
	for _, bt := range st.Batches {
		fmt.Fprintf(&b, "#EXTINF:%.3f,\n%s\n", float64(bt.ToMS-bt.FromMS)/1000, n.URI(bt.VTTKey))
	}
	if ended {
		b.WriteString("#EXT-X-ENDLIST\n")
	}
	return b.String()
}

// head writes the lines every media playlist of a stream starts with.
func head(b *strings.Builder, target int) {
	fmt.Fprintf(b, "#EXTM3U\n#EXT-X-VERSION:7\n#EXT-X-TARGETDURATION:%d\n#EXT-X-PLAYLIST-TYPE:EVENT\n#EXT-X-MEDIA-SEQUENCE:0\n#EXT-X-INDEPENDENT-SEGMENTS\n", max(target, 1))
}

// targetDuration is the longest piece, rounded up to whole seconds, and at
// least the pieces' target, so that it does not change as the stream grows.
func targetDuration(st *State) int {
	longest := 6_000
	for _, bt := range st.Batches {
		for _, p := range bt.Pieces {
			longest = max(longest, p.DurationMS)
		}
	}
	return int(math.Ceil(float64(longest) / 1000))
}

// Folder is the folder of the stored stream: where its first init
// segment is ("/" before the first batch).
func (st *State) Folder() string { return path.Dir(st.Init.Key) + "/" }

// Duration is how long the stream's batches play.
func (st *State) Duration() int {
	if len(st.Batches) == 0 {
		return 0
	}
	return st.Batches[len(st.Batches)-1].ToMS
}

// Putter stores an object: the object store.
type Putter interface {
	Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error
}

// Store writes the task's playlists to the object store as recorded now —
// the multivariant playlist, the video's and the subtitles' — holding the
// stream's row meanwhile (Locked), so that an older playlist never lands
// over a newer one. dir is the stream's folder (Dir); language names the
// subtitles.
func Store(ctx context.Context, db Beginner, objects Putter, task uuid.UUID, dir, language string) error {
	return Locked(ctx, db, task, func(st *State) error { return put(ctx, objects, st, dir, language) })
}

// put writes the playlists of st to the object store under dir.
func put(ctx context.Context, objects Putter, st *State, dir, language string) error {
	n := Relative(dir, st.Version)
	for _, f := range []struct{ name, body string }{
		{n.Video, Video(st, n, st.Ended)},
		{n.Subtitles, Subtitles(st, n, st.Ended)},
		{MasterName, Master(n, st.Init.Codecs, language)},
	} {
		if err := objects.Put(ctx, dir+f.name, strings.NewReader(f.body), int64(len(f.body)), ContentType); err != nil {
			return fmt.Errorf("store %s: %w", dir+f.name, err)
		}
	}
	return nil
}

// ContentType is the media type of an HLS playlist.
const ContentType = "application/vnd.apple.mpegurl"

// End ends a task's stream where it is made — the task was cancelled or
// failed, nothing more will be made — and stores its playlists ended.
// language names the subtitles. A task without a stream, or whose stream
// has ended, is left alone. The stream is marked ended in the transaction
// that stores the playlists, under the stream's row lock: when a playlist
// cannot be stored (the object store is down) nothing is marked, and a
// later End tries again.
func End(ctx context.Context, db Beginner, objects Putter, task uuid.UUID, language string) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		var initKey string
		err := tx.QueryRow(ctx, `UPDATE task_streams SET ended_at = now(), updated_at = now()
			WHERE task_id = $1 AND ended_at IS NULL RETURNING init_key`, task).Scan(&initKey)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("end the stream of %s: %w", task, err)
		}
		if initKey == "" {
			return nil // nothing stored yet
		}
		st, err := Load(ctx, tx, task)
		if err != nil {
			return err
		}
		return put(ctx, objects, st, path.Dir(initKey)+"/", language)
	})
}
