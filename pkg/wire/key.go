package wire

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Kinds of object key: the first segment of every object key,
// {kind}/{task_id}/....
const (
	KindVideo  = "videos"
	KindAudio  = "audios"
	KindASR    = "asr"
	KindTTS    = "tts"
	KindOutput = "outputs"
	// KindSubtitles holds the subtitle files a task starts from
	// (ExtractAudio.SubtitlesKey).
	KindSubtitles = "subtitles"
)

// MaxKeyBytes is the longest object key accepted, the S3 limit.
const MaxKeyBytes = 1024

// CheckKey reports whether key is a safe object key of the given kind that
// belongs to taskID: "<kind>/<taskID>/<name>[/<name>...]" with no "..", no
// "." segment, no empty segment, no leading '/', no backslash, no control
// character, valid UTF-8 and at most MaxKeyBytes bytes. A violation is an
// *InvalidError with Field "key".
func CheckKey(key, kind string, taskID uuid.UUID) error {
	if reason := keyProblem(key); reason != "" {
		return invalid("key", reason)
	}
	switch kind {
	case KindVideo, KindAudio, KindASR, KindTTS, KindOutput, KindSubtitles:
	default:
		return invalid("key", fmt.Sprintf("unknown key kind %q", kind))
	}
	prefix := kind + "/" + taskID.String() + "/"
	if !strings.HasPrefix(key, prefix) {
		return invalid("key", fmt.Sprintf("must start with %q", prefix))
	}
	return nil
}

// keyProblem returns why key is not a safe object key, or "" if it is one.
// It accepts exactly the strings the objectKey pattern of defs.schema.json
// accepts, apart from the UTF-8 check and a length counted in bytes.
func keyProblem(key string) string {
	switch {
	case key == "":
		return "must not be empty"
	case len(key) > MaxKeyBytes:
		return fmt.Sprintf("must be at most %d bytes, got %d", MaxKeyBytes, len(key))
	case !utf8.ValidString(key):
		return "must be valid UTF-8"
	case strings.ContainsFunc(key, unicode.IsControl):
		return "must not contain control characters"
	case strings.Contains(key, `\`):
		return `must not contain '\'`
	case strings.HasPrefix(key, "/"):
		return "must not start with '/'"
	case strings.Contains(key, ".."):
		return "must not contain '..'"
	}
	for _, seg := range strings.Split(key, "/") {
		switch seg {
		case "":
			return "must not contain empty segments"
		case ".":
			return "must not contain '.' segments"
		}
	}
	return ""
}

// Keys are a task's standard object keys, {kind}/{task_id}/{name}.
type Keys struct {
	SourceVideo string // videos/{task_id}/source.mp4
	SourceAudio string // audios/{task_id}/source.wav
	ASR         string // asr/{task_id}/asr.json
	DubAudio    string // tts/{task_id}/dub.wav
	OutputVideo string // outputs/{task_id}/final.mp4
	// BurnedVideo is the output with subtitles drawn into the picture
	// (ExtractAudio.BurnSubtitles): outputs/{task_id}/final.burned.mp4.
	BurnedVideo string
}

// DefaultKeys returns the standard object keys of a task.
func DefaultKeys(taskID uuid.UUID) Keys {
	id := taskID.String()
	return Keys{
		SourceVideo: KindVideo + "/" + id + "/source.mp4",
		SourceAudio: KindAudio + "/" + id + "/source.wav",
		ASR:         KindASR + "/" + id + "/asr.json",
		DubAudio:    KindTTS + "/" + id + "/dub.wav",
		OutputVideo: KindOutput + "/" + id + "/final.mp4",
		BurnedVideo: KindOutput + "/" + id + "/final.burned.mp4",
	}
}

// SubtitlesKey returns where a door stores a subtitle file a task starts
// from: subtitles/{task_id}/{name}.{ext} (name "subtitles" for the file,
// "source" for the source text beside a target-language one; ext "srt"
// or "vtt").
func SubtitlesKey(taskID uuid.UUID, name, ext string) string {
	return KindSubtitles + "/" + taskID.String() + "/" + name + "." + ext
}

// BurnedKey returns the key of the burned-in output beside the output
// video key: final.mp4 → final.burned.mp4 in the same folder.
func BurnedKey(outputVideoKey string) string {
	return strings.TrimSuffix(outputVideoKey, ".mp4") + ".burned.mp4"
}

// SegmentKey returns the object key of one synthesised segment,
// tts/{task_id}/seg-{idx:06d}.wav.
func SegmentKey(taskID uuid.UUID, idx int) string {
	return fmt.Sprintf("%s/%s/seg-%06d.wav", KindTTS, taskID, idx)
}
