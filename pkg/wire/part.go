package wire

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Parter is the payload of a step that fans out: each of its messages
// carries one part of the step, named by Part. The name is the part's key in
// the step attempts and the step's registered parts (its attempts'
// idempotency key), so it is a
// property of the message: every process — the worker that claims it, the
// one that emits it, the reconciler and dubctl that re-drive it — names a
// message's part the same way, from its payload alone. The payload of a
// step with one part is no Parter; its part is "".
//
// Translate is a Parter (one part per batch of segments), and so is ASR
// (one part per chunk of the audio, and the merge).
type Parter interface {
	Part() string
}

// Part names an asr message's part: "chunk-00003" for a chunk, "merge" for
// the merge, "" for the whole audio (the seed's message).
func (p *ASR) Part() string {
	switch {
	case p.Merge:
		return "merge"
	case p.Chunk != nil:
		return fmt.Sprintf("chunk-%05d", p.Chunk.Index)
	}
	return ""
}

// Part names a translate message's part by its batch's segment ids, with
// "r<n>/" before them for a revision above 0: the batches sent again after
// a review are parts of their own, never duplicates of the batches that
// translated the lines before.
func (p *Translate) Part() string {
	if p.Revision > 0 {
		return "r" + strconv.Itoa(p.Revision) + "/" + PartByIDs(p.SegmentIDs)
	}
	return PartByIDs(p.SegmentIDs)
}

// PartByIDs names a part by the ids of the items it carries, joined by
// commas. A name longer than 200 bytes becomes first..last#hash, which
// cannot be turned back into the ids: the message emitted for a part is kept
// with the registered part for re-drives.
func PartByIDs(ids []string) string {
	part := strings.Join(ids, ",")
	if len(part) > 200 {
		sum := sha256.Sum256([]byte(part))
		part = ids[0] + ".." + ids[len(ids)-1] + "#" + hex.EncodeToString(sum[:8])
	}
	return part
}

// Part names the part of its step that e carries: "" for a step with one
// part, else what its payload (a Parter) says. An error means the payload
// cannot be read.
func (e *Envelope) Part() (string, error) {
	newPayload, ok := payloadTypes[e.Step]
	if !ok {
		return "", nil
	}
	p, ok := newPayload().(Parter)
	if !ok {
		return "", nil
	}
	if err := json.Unmarshal(e.Payload, p); err != nil {
		return "", fmt.Errorf("read %s part: %w", e.Step, err)
	}
	return p.Part(), nil
}

// Depender is the payload of a message that waits for another step than
// the one its route names (Previous): After returns that step ("" for
// none) and ok, or ok false to keep the route's.
type Depender interface {
	After() (step string, ok bool)
}

// After names the step that must have succeeded before e runs: routeAfter
// (its route's, Previous(step)) unless its payload is a Depender that says
// otherwise. A payload that cannot be read keeps routeAfter (Part reports
// the error).
func (e *Envelope) After(routeAfter string) string {
	newPayload, ok := payloadTypes[e.Step]
	if !ok {
		return routeAfter
	}
	d, ok := newPayload().(Depender)
	if !ok {
		return routeAfter
	}
	if err := json.Unmarshal(e.Payload, d); err != nil {
		return routeAfter
	}
	if after, ok := d.After(); ok {
		return after
	}
	return routeAfter
}
