package speech

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// This file is what each engine can do, as the workers announce it
// (pkg/admit): the languages a recogniser hears, the pairs a translator
// knows, the languages a synthesizer speaks. The console and dubctl do not
// run the engines; they judge a task's languages by what the workers
// announced.

// AnyLanguage in a capability list means every language (a remote engine
// that declares no list: a chat model, an OpenAI-compatible recogniser).
const AnyLanguage = "*"

// Capable is an engine that can say what it handles: language codes for a
// recogniser or a synthesizer, pairs "from|to" (Pair) for a translator, or
// AnyLanguage. Codes are BaseLanguage's.
type Capable interface {
	Capabilities(ctx context.Context) ([]string, error)
}

// BaseLanguage reduces a language tag to the code the engines compare:
// lower case, without region ("en-US" → "en"), ISO 639-3 codes the package
// knows as ISO 639-1 ("eng" → "en"); other tags stay as they are.
func BaseLanguage(tag string) string { return baseLanguage(tag) }

// Pair is a translator's capability for from → to: "en|es".
func Pair(from, to string) string { return BaseLanguage(from) + "|" + BaseLanguage(to) }

// Capabilities asks engine what it handles: for a Chunker or a Batcher,
// its Engine. An engine that cannot say handles AnyLanguage.
func Capabilities(ctx context.Context, engine any) ([]string, error) {
	switch e := engine.(type) {
	case *Chunker:
		engine = e.Engine
	case *Batcher:
		engine = e.Engine
	}
	if c, ok := engine.(Capable); ok {
		return c.Capabilities(ctx)
	}
	return []string{AnyLanguage}, nil
}

// Capabilities implements Capable: English, the only language the
// recogniser knows (Transcribe refuses others).
func (p *Pocketsphinx) Capabilities(context.Context) ([]string, error) {
	return []string{"en"}, nil
}

// Capabilities implements Capable: any language the server is asked for.
func (o *OpenAITranscriber) Capabilities(context.Context) ([]string, error) {
	return []string{AnyLanguage}, nil
}

// Capabilities implements Capable: the pairs of the installed modes
// (`apertium -l`), such as eng-spa → "en|es"; variants (eng-cat_valencia)
// are left out, as Translate never names them.
func (a *Apertium) Capabilities(ctx context.Context) ([]string, error) {
	out, err := run(ctx, nil, "apertium", "-l")
	if err != nil {
		// Without the program, the modes directory says the same.
		return a.modesInDir()
	}
	return modePairs(strings.Fields(string(out))), nil
}

// modesInDir lists the pairs of the mode files in ModesDir.
func (a *Apertium) modesInDir() ([]string, error) {
	dir := a.ModesDir
	if dir == "" {
		dir = "/usr/share/apertium/modes"
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.mode"))
	if err != nil {
		return nil, fmt.Errorf("apertium modes: %w", err)
	}
	var modes []string
	for _, f := range files {
		modes = append(modes, strings.TrimSuffix(filepath.Base(f), ".mode"))
	}
	return modePairs(modes), nil
}

// modePairs maps Apertium mode names to pairs, each once, sorted.
func modePairs(modes []string) []string {
	pairs := []string{}
	for _, m := range modes {
		if !validMode(m) {
			continue
		}
		from, to, _ := strings.Cut(m, "-")
		if p := Pair(from, to); !slices.Contains(pairs, p) {
			pairs = append(pairs, p)
		}
	}
	slices.Sort(pairs)
	return pairs
}

// Capabilities implements Capable: the pairs the APy server lists
// (GET /listPairs).
func (a *APy) Capabilities(ctx context.Context) ([]string, error) {
	const op = "apy listPairs"
	req, err := http.NewRequest(http.MethodGet, joinURL(a.BaseURL, "/listPairs"), nil)
	if err != nil {
		return nil, malformed(op, fmt.Errorf("%w (check TRANSLATE_BASE_URL)", err))
	}
	body, _, err := do(ctx, a.Client, req, op)
	if err != nil {
		return nil, err
	}
	var r struct {
		ResponseData []struct {
			Source string `json:"sourceLanguage"`
			Target string `json:"targetLanguage"`
		} `json:"responseData"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, malformed(op, err)
	}
	pairs := []string{}
	for _, p := range r.ResponseData {
		if pair := Pair(p.Source, p.Target); !slices.Contains(pairs, pair) {
			pairs = append(pairs, pair)
		}
	}
	slices.Sort(pairs)
	return pairs, nil
}

// Capabilities implements Capable: a chat model is asked for any pair.
func (c *ChatTranslator) Capabilities(context.Context) ([]string, error) {
	return []string{AnyLanguage}, nil
}

// Capabilities implements Capable: the languages of the installed voices
// (`espeak-ng --voices`), each reduced by BaseLanguage ("en-gb" → "en"),
// or AnyLanguage when the synthesizer has a fixed Voice (it speaks every
// language with it).
func (e *Espeak) Capabilities(ctx context.Context) ([]string, error) {
	if e.Voice != "" && e.Voice != "default" {
		return []string{AnyLanguage}, nil
	}
	cmdName := e.Command
	if cmdName == "" {
		cmdName = "espeak-ng"
	}
	out, err := run(ctx, nil, cmdName, "--voices")
	if err != nil {
		return nil, fmt.Errorf("espeak-ng --voices: %w", err)
	}
	return voiceLanguages(string(out)), nil
}

// voiceLanguages reads the Language column of `espeak-ng --voices`.
func voiceLanguages(out string) []string {
	langs := []string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[0] == "Pty" {
			continue
		}
		if l := BaseLanguage(f[1]); !slices.Contains(langs, l) {
			langs = append(langs, l)
		}
	}
	slices.Sort(langs)
	return langs
}

// Capabilities implements Capable: the service is asked for any language.
func (t *TTSService) Capabilities(context.Context) ([]string, error) {
	return []string{AnyLanguage}, nil
}

// Capabilities implements Capable: the server is asked for any language.
func (o *OpenAISynthesizer) Capabilities(context.Context) ([]string, error) {
	return []string{AnyLanguage}, nil
}

// Voiced is a synthesizer that can list the voices a request may name
// (SynthesisRequest.Voice, a task's speaker): voice names as the engine
// takes them, and variants (a voice "name+variant") as "+variant"; or
// AnyLanguage when it takes any name.
type Voiced interface {
	Voices(ctx context.Context) ([]string, error)
}

// Voices asks a synthesizer which voices it has (Voiced); one that cannot
// say takes any name (AnyLanguage).
func Voices(ctx context.Context, engine any) ([]string, error) {
	if v, ok := engine.(Voiced); ok {
		return v.Voices(ctx)
	}
	return []string{AnyLanguage}, nil
}

// Voices implements Voiced: the voices of `espeak-ng --voices` by
// language code ("en-us", and the codes of its Other Languages column; not
// by file, "gmw/en-US", which no task's speaker can name), and the
// variants of `espeak-ng --voices=variant` ("+m3", "+alex"), all lower
// case: espeak-ng takes "es+m3" and "EN-US".
func (e *Espeak) Voices(ctx context.Context) ([]string, error) {
	cmdName := e.Command
	if cmdName == "" {
		cmdName = "espeak-ng"
	}
	voices, err := run(ctx, nil, cmdName, "--voices")
	if err != nil {
		return nil, fmt.Errorf("espeak-ng --voices: %w", err)
	}
	variants, err := run(ctx, nil, cmdName, "--voices=variant")
	if err != nil {
		return nil, fmt.Errorf("espeak-ng --voices=variant: %w", err)
	}
	return espeakVoiceNames(string(voices), string(variants)), nil
}

// otherLanguage is an entry "(code priority)" of the Other Languages
// column of `espeak-ng --voices`.
var otherLanguage = regexp.MustCompile(`\(([^ ()]+) [0-9]+\)`)

// espeakVoiceNames reads the voice names out of `espeak-ng --voices` and
// `espeak-ng --voices=variant`, each once, sorted.
func espeakVoiceNames(voices, variants string) []string {
	var out []string
	add := func(name string) {
		if name = strings.ToLower(name); name != "" && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	sc := bufio.NewScanner(strings.NewReader(voices))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 || f[0] == "Pty" {
			continue
		}
		add(f[1])
		for _, m := range otherLanguage.FindAllStringSubmatch(strings.Join(f[5:], " "), -1) {
			add(m[1])
		}
	}
	sc = bufio.NewScanner(strings.NewReader(variants))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 || f[0] == "Pty" {
			continue
		}
		add("+" + strings.TrimPrefix(f[4], "!v/"))
	}
	slices.Sort(out)
	return out
}
