package speech

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Term is one entry of a glossary: Source (matched case-insensitively, as
// a whole word or phrase) is translated to Target, or kept exactly as it
// was written when Target is empty.
type Term struct {
	Source string
	Target string
}

// glossaryPrompter is an engine that can also be told the glossary in its
// prompt (the chat engines).
type glossaryPrompter interface {
	withGlossary(terms []Term) Translator
}

// WithGlossary returns a Translator that keeps engine to terms. Before
// translation every occurrence of a term is replaced by a placeholder token
// that the engines copy unchanged (checked with apertium eng-spa: an unknown
// alphanumeric word passes through as it is); after translation each token
// is replaced by the term's target, or by the source as it was written for a
// kept term. Chat engines are also given the glossary in their prompt. A
// translation that lost a placeholder is an error (transient: Batcher tries
// the text again on its own). With no terms, engine is returned as it is.
func WithGlossary(engine Translator, terms []Term) Translator {
	terms = slices.DeleteFunc(slices.Clone(terms), func(t Term) bool { return strings.TrimSpace(t.Source) == "" })
	if len(terms) == 0 {
		return engine
	}
	if p, ok := engine.(glossaryPrompter); ok {
		engine = p.withGlossary(terms)
	}
	// Longest terms first: the alternation takes the first that matches.
	slices.SortStableFunc(terms, func(a, b Term) int { return len(b.Source) - len(a.Source) })
	alts := make([]string, len(terms))
	for i, t := range terms {
		alts[i] = regexp.QuoteMeta(strings.TrimSpace(t.Source))
	}
	return &glossed{engine: engine, terms: terms, re: regexp.MustCompile(`(?i)(?:` + strings.Join(alts, "|") + `)`)}
}

// glossed is the Translator WithGlossary returns.
type glossed struct {
	engine Translator
	terms  []Term
	re     *regexp.Regexp
}

// placeholder is the token standing for the i-th protected occurrence.
func placeholder(i int) string { return "QZX" + strconv.Itoa(i) + "ZQ" }

// Translate implements Translator.
func (g *glossed) Translate(ctx context.Context, texts []string, from, to string) ([]string, error) {
	protected := make([]string, len(texts))
	subs := make([][]string, len(texts)) // subs[i][k]: what placeholder k of text i becomes
	for i, text := range texts {
		protected[i], subs[i] = g.protect(text)
	}
	out, err := g.engine.Translate(ctx, protected, from, to)
	if err != nil || len(out) != len(texts) {
		return out, err
	}
	for i := range out {
		if out[i], err = restore(out[i], subs[i]); err != nil {
			return nil, fmt.Errorf("glossary: text %d: %w", i, err)
		}
	}
	return out, nil
}

// protect replaces each whole-word occurrence of a term in text by a
// placeholder and returns what each placeholder stands for.
func (g *glossed) protect(text string) (string, []string) {
	var b strings.Builder
	var subs []string
	last := 0
	for _, m := range g.re.FindAllStringIndex(text, -1) {
		if !wordEdge(text, m[0], m[1]) {
			continue
		}
		found := text[m[0]:m[1]]
		sub := found
		for _, t := range g.terms {
			if strings.EqualFold(strings.TrimSpace(t.Source), found) && t.Target != "" {
				sub = t.Target
				break
			}
		}
		b.WriteString(text[last:m[0]])
		b.WriteString(placeholder(len(subs)))
		subs = append(subs, sub)
		last = m[1]
	}
	if subs == nil {
		return text, nil
	}
	b.WriteString(text[last:])
	return b.String(), subs
}

// wordEdge reports whether text[lo:hi] starts and ends at word boundaries.
func wordEdge(text string, lo, hi int) bool {
	isWord := func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' }
	if lo > 0 {
		if r, _ := utf8.DecodeLastRuneInString(text[:lo]); isWord(r) {
			return false
		}
	}
	if hi < len(text) {
		if r, _ := utf8.DecodeRuneInString(text[hi:]); isWord(r) {
			return false
		}
	}
	return true
}

// restore replaces the placeholders in a translation by what they stand
// for; a placeholder missing from it is an error.
func restore(text string, subs []string) (string, error) {
	// Highest numbers first, so QZX1ZQ never matches inside QZX10ZQ.
	for k := len(subs) - 1; k >= 0; k-- {
		token := placeholder(k)
		if !strings.Contains(text, token) {
			return "", fmt.Errorf("the engine dropped the glossary placeholder of %q", subs[k])
		}
		text = strings.ReplaceAll(text, token, subs[k])
	}
	return text, nil
}

// glossaryPrompt is what a chat engine is told about the glossary.
func glossaryPrompt(terms []Term) string {
	var b strings.Builder
	b.WriteString("Words like QZX0ZQ, QZX1ZQ stand for fixed terms: copy them unchanged, exactly once each. Glossary:")
	for _, t := range terms {
		if t.Target == "" {
			fmt.Fprintf(&b, "\n- %q: keep as it is", t.Source)
		} else {
			fmt.Fprintf(&b, "\n- %q: %q", t.Source, t.Target)
		}
	}
	return b.String()
}
