package wire

import (
	"fmt"
	"slices"

	"github.com/google/uuid"
)

// MaxTargetLanguages bounds target_languages (extract_audio.schema.json).
const MaxTargetLanguages = 10

// Targets returns the languages the task of p dubs into, in order and each
// once: target_languages when it names two or more, else none (a task with
// one language is dubbed by itself, as before, into target_language).
func (p *ExtractAudio) Targets() []string {
	var out []string
	for _, l := range p.TargetLanguages {
		if !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	if len(out) < 2 {
		return nil
	}
	return out
}

// checkTargets: target_language, when given beside target_languages, must
// be one of them.
func (p *ExtractAudio) checkTargets() *InvalidError {
	if p.TargetLanguage != "" && len(p.TargetLanguages) > 0 && !slices.Contains(p.TargetLanguages, p.TargetLanguage) {
		return invalid("target_language", fmt.Sprintf("%q is not one of target_languages", p.TargetLanguage))
	}
	return nil
}

// childNamespace is the UUID namespace of child task ids.
var childNamespace = uuid.MustParse("6f0c7a52-3b1e-5d8e-9a57-1f2b7c0d4e13")

// ChildTaskID is the id of the child task that dubs parent's video into
// language: a name-based (SHA-1) UUID of the two, so that everyone who knows
// the parent — dubctl uploading the video under the child's key, the asr
// worker spawning the child, an integrator — names the same child.
func ChildTaskID(parent uuid.UUID, language string) uuid.UUID {
	return uuid.NewSHA1(childNamespace, []byte(parent.String()+"/"+language))
}
