package wire

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/google/uuid"
)

// A task's output has versions: version 1 is the first dub, and each re-dub
// of a line builds the next one. A version above 1 is a part of its own of
// the tts and mux_video steps, named "v<n>", so that its runs are attempts
// of that part: a re-dub is neither skipped as a duplicate of the first
// dub's succeeded part nor does it rewrite that history, and its retries and
// redeliveries keep the claim rules of any other part. Its objects live
// under a folder of their own, so earlier versions stay readable.

// VersionPart names the part of the tts and mux_video steps that builds
// version v: "" for the first dub (v ≤ 1), "v<n>" otherwise.
func VersionPart(v int) string {
	if v <= 1 {
		return ""
	}
	return "v" + strconv.Itoa(v)
}

// Part names the tts message's part: by its version for a message without
// segment ids (the whole task), else by its segment ids as a translate
// batch is ("seg-0,seg-1"; "v<n>/seg-0,..." for a version above 1).
func (p *TTS) Part() string {
	if len(p.SegmentIDs) == 0 {
		return VersionPart(p.Version)
	}
	if v := VersionPart(p.Version); v != "" {
		return v + "/" + PartByIDs(p.SegmentIDs)
	}
	return PartByIDs(p.SegmentIDs)
}

// After names the step a tts part waits for: none. A part (segment ids)
// is emitted by the translate batch that translated its segments, in the
// same transaction, so its input exists when it does, and its speakers are
// told apart from the segments known so far (speaker.Extend): synthesis
// runs while later chunks are still transcribed and translated. A message
// for the whole task waits for translate, as ever (ok false).
func (p *TTS) After() (string, bool) {
	if len(p.SegmentIDs) > 0 {
		return "", true
	}
	return "", false
}

// MuxFor is the mux_video message that builds version v of a task whose
// row names sourceVideoKey and outputVideoKey (empty: the default keys). A
// re-dub (v > 1) writes a version of its own; earlier outputs stay. Every
// step that may emit a task's mux_video builds it here, so that the
// message is the same whichever emits it.
func MuxFor(taskID uuid.UUID, v int, sourceVideoKey, outputVideoKey string) MuxVideo {
	keys := VersionKeys(taskID, v)
	output := cmp.Or(outputVideoKey, keys.OutputVideo)
	if v > 1 {
		output = keys.OutputVideo
	}
	return MuxVideo{TaskID: taskID, SourceVideoKey: cmp.Or(sourceVideoKey, keys.SourceVideo), TTSAudioKey: keys.DubAudio,
		OutputVideoKey: output, Version: v}
}

// Part names the mux_video message's part by its version, or a stream
// message's by the part that emitted it.
func (p *MuxVideo) Part() string {
	if p.StreamAfter != "" {
		return StreamPartPrefix + p.StreamAfter
	}
	return VersionPart(p.Version)
}

// StreamPartPrefix begins the part of every growing stream's message.
const StreamPartPrefix = "stream/"

// After names the step a stream message waits for: none (its emitter's
// success is its input). A message that builds the output keeps the
// route's (ok false).
func (p *MuxVideo) After() (string, bool) {
	if p.StreamAfter != "" {
		return "", true
	}
	return "", false
}

// StreamFor is the growing stream's message of a task emitted by the
// success of part after (of asr or tts): it makes the next batches of the
// stream of the first version.
func StreamFor(taskID uuid.UUID, sourceVideoKey, outputVideoKey, after string) MuxVideo {
	m := MuxFor(taskID, 1, sourceVideoKey, outputVideoKey)
	m.StreamAfter = after
	if len(after) > 200 { // PartByIDs keeps names to ~200 bytes; the schema takes 240
		sum := sha256.Sum256([]byte(after))
		m.StreamAfter = after[:100] + "#" + hex.EncodeToString(sum[:8])
	}
	return m
}

// VersionKeys returns the object keys the output of version v of a task is
// written to: DefaultKeys for the first dub, and for v > 1 the dub track
// and the output under tts/{task_id}/v{n}/ and outputs/{task_id}/v{n}/.
func VersionKeys(taskID uuid.UUID, v int) Keys {
	k := DefaultKeys(taskID)
	if v <= 1 {
		return k
	}
	dir := fmt.Sprintf("%s/v%d/", taskID, v)
	k.DubAudio = KindTTS + "/" + dir + "dub.wav"
	k.OutputVideo = KindOutput + "/" + dir + "final.mp4"
	return k
}

// SegmentVersionKey returns the object key of one segment synthesized for
// version v: SegmentKey for the first dub, tts/{task_id}/v{n}/seg-{idx:06d}.wav
// otherwise.
func SegmentVersionKey(taskID uuid.UUID, idx, v int) string {
	if v <= 1 {
		return SegmentKey(taskID, idx)
	}
	return fmt.Sprintf("%s/%s/v%d/seg-%06d.wav", KindTTS, taskID, v, idx)
}

// Term is one entry of a task's glossary: Source is translated to Target,
// or kept as it is when Target is empty.
type Term struct {
	Source string `json:"source"`
	Target string `json:"target"`
}
