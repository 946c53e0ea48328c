package admit

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/dubflow/dubflow/pkg/glossary"
	"github.com/dubflow/dubflow/pkg/speech"
	"github.com/dubflow/dubflow/pkg/textrule"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

// Limits of a request besides its media's. The speaker's and the
// languages' are the wire contract's (proto/defs.schema.json), the
// glossary's pkg/glossary's (proto/extract_audio.schema.json).
const (
	// MaxTargets bounds the languages one task dubs into.
	MaxTargets = wire.MaxTargetLanguages
	// MaxSpeakerLength bounds a speaker (voice) name.
	MaxSpeakerLength = 64
	// MaxLanguageLength bounds a language code.
	MaxLanguageLength = 35
	// MaxGlossaryBytes bounds a glossary's CSV text.
	MaxGlossaryBytes = 1 << 20
	// MaxGlossaryTerms and MaxTermLength bound a glossary's terms.
	MaxGlossaryTerms = glossary.MaxTerms
	MaxTermLength    = glossary.MaxTermLength
)

// languagePattern and speakerPattern are the wire contract's
// (proto/defs.schema.json, language and speakerId).
var (
	languagePattern = regexp.MustCompile(`^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$`)
	speakerPattern  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:+@-]*$`)
)

// Request is a task as a door receives it, before any check.
type Request struct {
	// Source is the language spoken in the video; "" for the default.
	Source string
	// Targets are the languages to dub into: each value one language or
	// several separated by commas ("es,ca"); none for the default.
	Targets []string
	// Speaker is the voice of the dub; "" for the engine's default.
	Speaker string
	// Glossary is a glossary as CSV text, "source,target" a line (the
	// format of dubctl's --glossary file); "" for none.
	Glossary string
	// FileName is the name of the uploaded file as the client gave it
	// (a path is cut to its last element); "" when unknown.
	FileName string
	// Review are the stages the task stops at for a person's edits: each
	// value one stage or several separated by commas
	// ("transcript,translation"); none for none.
	Review []string
	// Subtitles is a subtitle file's text (SubRip or WebVTT) the task
	// starts from instead of recognising the speech; "" for none.
	// SubtitlesLanguage is its language ("" for the source), and
	// SourceSubtitles, beside a file in the target language, a second file
	// with the source text ("" for none).
	Subtitles, SubtitlesLanguage, SourceSubtitles string
	// BurnSubtitles asks for an extra output with subtitles drawn in:
	// wire.BurnTarget, wire.BurnBilingual or "" for none.
	BurnSubtitles string
}

// Rules are what a request is judged by besides its own values.
type Rules struct {
	// DefaultSource and DefaultTarget stand in for languages the request
	// leaves out (DEFAULT_SOURCE_LANGUAGE, DEFAULT_TARGET_LANGUAGE).
	DefaultSource, DefaultTarget string
	// Capabilities are what the workers' engines announced
	// (LoadCapabilities); a step without announcements is not judged.
	Capabilities Capabilities
}

// Task is an admitted request: defaults filled in, targets split, each
// once, the glossary parsed.
type Task struct {
	Source  string
	Targets []string
	Speaker string
	// Glossary is nil when the request has none.
	Glossary []wire.Term
	// FileName is the request's file name, cleaned (CleanFileName).
	FileName string
	// Review are the stages the task stops at for review, in the order
	// it reaches them (nil for none).
	Review []string
	// Subtitles are the files the task starts from; nil for none.
	Subtitles *Subtitles
	// BurnSubtitles is wire.BurnTarget, wire.BurnBilingual or "".
	BurnSubtitles string
}

// Check admits req or returns the first refusal as an *Error, checking in
// this order: the source, the targets (syntax, each once, at most
// MaxTargets, none the source's language), the subtitles (their language,
// then the files: pkg/subtitle's rules, a refusal naming its line), what
// the engines can do (Rules.Capabilities; a step the subtitles skip is not
// judged), the speaker (a voice the engines announced), the glossary, the
// burned-in subtitles, the review stages (Review). It is pure: the media
// are checked by Media (and the subtitles against the video's length by
// Task.FitVideo), the capabilities loaded by LoadCapabilities.
func Check(req Request, rules Rules) (Task, error) {
	t := Task{Source: strings.TrimSpace(req.Source), Speaker: strings.TrimSpace(req.Speaker),
		FileName: CleanFileName(req.FileName)}
	if t.Source == "" {
		t.Source = rules.DefaultSource
	}
	var err error
	if t.Targets, err = splitTargets(req.Targets, rules.DefaultTarget); err != nil {
		return Task{}, err
	}
	if err := checkLanguages(t.Source, t.Targets); err != nil {
		return Task{}, err
	}
	if t.Subtitles, err = checkSubtitles(req, t.Source, t.Targets); err != nil {
		return Task{}, err
	}
	if err := rules.Capabilities.judge(t.Source, t.Targets, t.Skipped()); err != nil {
		return Task{}, err
	}
	if err := Speaker(t.Speaker, rules.Capabilities); err != nil {
		return Task{}, err
	}
	if t.Glossary, err = parseGlossary(req.Glossary); err != nil {
		return Task{}, err
	}
	review, err := splitReview(req.Review)
	if err != nil {
		return Task{}, err
	}
	if err := Review(review, t.Targets); err != nil {
		return Task{}, err
	}
	t.Review = reviewOrder(review)
	if t.BurnSubtitles, err = checkBurn(req.BurnSubtitles); err != nil {
		return Task{}, err
	}
	return t, nil
}

// Payload is the extract_audio payload that starts the admitted task id:
// the video at videos/{id}/source.mp4, the languages (target_languages
// when there are several), the speaker, the glossary, the subtitle files
// (at the keys of SubtitleFiles, which the door stores first), the
// burned-in subtitles and the review stages.
func (t Task) Payload(id uuid.UUID) wire.ExtractAudio {
	keys := wire.DefaultKeys(id)
	p := wire.ExtractAudio{SourceVideoKey: keys.SourceVideo, OutputAudioKey: keys.SourceAudio,
		SourceLanguage: t.Source, TargetLanguage: t.Targets[0], SpeakerID: t.Speaker, Glossary: t.Glossary,
		Review: t.Review}
	if len(t.Targets) > 1 {
		p.TargetLanguages = t.Targets
	}
	if files := t.SubtitleFiles(id); len(files) > 0 {
		p.SubtitlesKey, p.SubtitlesLanguage = files[0].Key, t.Subtitles.Language
		if len(files) > 1 {
			p.SourceSubtitlesKey = files[1].Key
		}
	}
	p.BurnSubtitles = t.BurnSubtitles
	return p
}

// splitTargets reads the target values: languages separated by commas,
// each once, at most MaxTargets; none gives def.
func splitTargets(values []string, def string) ([]string, error) {
	var out []string
	for _, v := range values {
		for _, l := range strings.Split(v, ",") {
			if l = strings.TrimSpace(l); l == "" {
				continue
			}
			for _, seen := range out {
				if seen == l {
					return nil, refuse("target", l, "named twice")
				}
			}
			out = append(out, l)
		}
	}
	if len(out) == 0 && def != "" {
		out = []string{def}
	}
	switch {
	case len(out) == 0:
		return nil, refuse("target", "", "no language to dub into")
	case len(out) > MaxTargets:
		return nil, refuse("target", "", fmt.Sprintf("%d languages, at most %d", len(out), MaxTargets))
	}
	return out, nil
}

// Languages checks a task's languages: each a language code, at most
// MaxTargets targets, each once, none the source's language, and each
// possible with the engines that caps describes. extract_audio calls it
// for a message an outside publisher sent; Check calls it for the doors.
func Languages(source string, targets []string, caps Capabilities) error {
	return LanguagesSkipping(source, targets, caps, nil)
}

// LanguagesSkipping is Languages for a task whose plan skips the steps
// skipped (wire.ExtractAudio.SkippedSteps): their engines are not judged
// (a task from subtitles needs no speech recognition for its source).
func LanguagesSkipping(source string, targets []string, caps Capabilities, skipped []string) error {
	if err := checkLanguages(source, targets); err != nil {
		return err
	}
	return caps.judge(source, targets, skipped)
}

// checkLanguages checks the languages' syntax: each a language code, at
// most MaxTargets targets, each once, none the source's language.
func checkLanguages(source string, targets []string) error {
	if err := checkLanguage("source", source); err != nil {
		return err
	}
	if len(targets) > MaxTargets {
		return refuse("target", "", fmt.Sprintf("%d languages, at most %d", len(targets), MaxTargets))
	}
	for i, t := range targets {
		if err := checkLanguage("target", t); err != nil {
			return err
		}
		for _, seen := range targets[:i] {
			if seen == t {
				return refuse("target", t, "named twice")
			}
		}
		if speech.BaseLanguage(t) == speech.BaseLanguage(source) {
			return refuse("target", t, fmt.Sprintf("the same language as the source (%s)", source))
		}
	}
	return nil
}

// checkLanguage checks a language code's syntax.
func checkLanguage(field, code string) error {
	if code == "" {
		return refuse(field, "", "no language given")
	}
	if len(code) > MaxLanguageLength || !languagePattern.MatchString(code) {
		return refuse(field, code, "want a language code such as en, es or pt-BR")
	}
	return nil
}

// Speaker checks a task's speaker (its voice; "" for the engine's
// default): a voice name (the wire contract's speakerId) that a tts engine
// caps describes has. Check calls it for the doors; extract_audio and tts
// for a message an outside publisher sent; a retry with another speaker
// (pkg/retry) for the new one.
func Speaker(s string, caps Capabilities) error {
	if err := checkSpeaker(s); err != nil {
		return err
	}
	return caps.judgeSpeaker(s)
}

// checkSpeaker checks a voice name: the wire contract's speakerId.
func checkSpeaker(s string) error {
	if s == "" {
		return nil
	}
	if utf8.RuneCountInString(s) > MaxSpeakerLength || !speakerPattern.MatchString(s) {
		return refuse("speaker", "", fmt.Sprintf("want a voice name of at most %d characters, letters, digits and . _ : + @ - (such as es+f3)",
			MaxSpeakerLength))
	}
	return nil
}

// parseGlossary parses a glossary's CSV text with dubctl's parser.
func parseGlossary(text string) ([]wire.Term, error) {
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	if len(text) > MaxGlossaryBytes {
		return nil, &Error{Field: "glossary", Reason: fmt.Sprintf("more than %d bytes", MaxGlossaryBytes), Kind: TooLarge}
	}
	terms, err := glossary.ParseCSV(strings.NewReader(text))
	if err != nil {
		reason := strings.TrimPrefix(err.Error(), glossary.ErrInvalid.Error()+": ")
		return nil, &Error{Field: "glossary", Reason: reason, Kind: Invalid, Err: err}
	}
	if len(terms) == 0 {
		return nil, nil
	}
	return terms, nil
}

// MaxFileNameBytes bounds a kept file name.
const MaxFileNameBytes = 255

// CleanFileName is the file name a task keeps of name: its last path
// element (either slash), without the characters the text rule refuses
// (textrule.Unsafe: control characters, bidirectional overrides), trimmed, at most
// MaxFileNameBytes bytes of valid UTF-8. A name is shown and searched,
// never used as a path, so nothing else is refused.
func CleanFileName(name string) string {
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	name = strings.Map(func(r rune) rune {
		if textrule.Unsafe(r) {
			return -1
		}
		return r
	}, strings.ToValidUTF8(name, ""))
	name = strings.TrimSpace(name)
	if len(name) > MaxFileNameBytes {
		name = strings.ToValidUTF8(name[:MaxFileNameBytes], "")
	}
	return name
}
