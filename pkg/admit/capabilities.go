package admit

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/engine"
	"github.com/dubflow/dubflow/pkg/speech"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/jackc/pgx/v5"
)

// Capabilities are the announcements the doors judge languages by.
// A step with no announcement is not judged: its workers may be scaled to
// zero, or not deployed yet, and a door must not refuse what it cannot
// know. The zero value judges nothing.
type Capabilities []engine.Capability

// Window is how long after a step's newest announcement other workers'
// announcements of the step still count: a running worker refreshes its
// own every engine.RefreshInterval, so an older one is a worker that is gone (or a
// deployment that changed its engine). The newest announcement counts
// however old it is: workers scaled to zero still say what they can do
// when they come back.
const Window = 10 * time.Minute

// judge checks that source can be transcribed, translated into each
// target and each target spoken, leaving out the steps skipped.
func (c Capabilities) judge(source string, targets []string, skipped []string) error {
	if langs, ok := c.of(wire.StepASR); ok && !slices.Contains(skipped, wire.StepASR) && !has(langs, speech.BaseLanguage(source)) {
		return refuse("source", source, fmt.Sprintf("no speech recognition for %s (installed: %s)",
			source, list(langs, "")))
	}
	pairs, judgePairs := c.of(wire.StepTranslate)
	judgePairs = judgePairs && !slices.Contains(skipped, wire.StepTranslate)
	voices, judgeVoices := c.of(wire.StepTTS)
	for _, t := range targets {
		if judgePairs && !has(pairs, speech.Pair(source, t)) {
			return refuse("target", t, fmt.Sprintf("no translation from %s to %s (installed: %s)",
				source, t, list(pairs, speech.BaseLanguage(source)+"|")))
		}
		if judgeVoices && !has(voices, speech.BaseLanguage(t)) {
			return refuse("target", t, fmt.Sprintf("no voice for %s (installed: %s)", t, list(voices, "")))
		}
	}
	return nil
}

// judgeSpeaker checks that a tts engine announced within Window of the
// newest tts announcement has speaker as a voice: its name (before a "+")
// and its variant (after it), compared without case. Announcements without
// voices judge nothing; with none, the speaker is not judged.
func (c Capabilities) judgeSpeaker(speaker string) error {
	// "default" names the engine's own voice, as every engine reads it
	// (seed 001's tts message carries speaker_id "default").
	if speaker == "" || speaker == "default" {
		return nil
	}
	voices, ok := c.voices()
	if !ok || slices.Contains(voices, speech.AnyLanguage) {
		return nil
	}
	name, variant, _ := strings.Cut(strings.ToLower(speaker), "+")
	if !slices.Contains(voices, name) || variant != "" && !slices.Contains(voices, "+"+variant) {
		return refuse("speaker", speaker, fmt.Sprintf("no such voice (installed: %s)", listVoices(voices)))
	}
	return nil
}

// voices returns the union of the tts announcements' voices within Window
// of the newest tts announcement, and whether any announced voices.
func (c Capabilities) voices() ([]string, bool) {
	var newest time.Time
	for _, a := range c {
		if a.Step == wire.StepTTS && a.SeenAt.After(newest) {
			newest = a.SeenAt
		}
	}
	var out []string
	found := false
	for _, a := range c {
		if a.Step != wire.StepTTS || a.Voices == nil || a.SeenAt.Before(newest.Add(-Window)) {
			continue
		}
		found = true
		for _, v := range a.Voices {
			if !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
	}
	slices.Sort(out)
	return out, found
}

// listVoices writes voices for an error: names first, then the variants,
// at most maxListed of each.
func listVoices(voices []string) string {
	var names, variants []string
	for _, v := range voices {
		if strings.HasPrefix(v, "+") {
			variants = append(variants, v)
		} else {
			names = append(names, v)
		}
	}
	out := list(names, "")
	if len(variants) > 0 {
		out += "; variants: " + list(variants, "")
	}
	return out
}

// of returns the union of step's announcements within Window of its
// newest, and whether there is any.
func (c Capabilities) of(step string) ([]string, bool) {
	var newest time.Time
	found := false
	for _, a := range c {
		if a.Step == step {
			found = true
			if a.SeenAt.After(newest) {
				newest = a.SeenAt
			}
		}
	}
	if !found {
		return nil, false
	}
	out := []string{}
	for _, a := range c {
		if a.Step != step || a.SeenAt.Before(newest.Add(-Window)) {
			continue
		}
		for _, l := range a.Languages {
			if !slices.Contains(out, l) {
				out = append(out, l)
			}
		}
	}
	slices.Sort(out)
	return out, true
}

// has reports whether langs holds l or any language.
func has(langs []string, l string) bool {
	return slices.Contains(langs, speech.AnyLanguage) || slices.Contains(langs, l)
}

// maxListed bounds the installed languages an error lists.
const maxListed = 20

// list writes langs for an error: pairs as from→to, those starting with
// prefix first (the source's), at most maxListed; "none" for none.
func list(langs []string, prefix string) string {
	var first, rest []string
	for _, l := range langs {
		shown := strings.Replace(l, "|", "→", 1)
		if prefix != "" && strings.HasPrefix(l, prefix) {
			first = append(first, shown)
		} else {
			rest = append(rest, shown)
		}
	}
	all := append(first, rest...)
	if len(all) == 0 {
		return "none"
	}
	if len(all) > maxListed {
		return fmt.Sprintf("%s and %d more", strings.Join(all[:maxListed], ", "), len(all)-maxListed)
	}
	return strings.Join(all, ", ")
}

// Querier runs a query: a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// LoadCapabilities reads the engines' announcements (engine_capabilities,
// written by engine.Announce).
func LoadCapabilities(ctx context.Context, db Querier) (Capabilities, error) {
	rows, err := db.Query(ctx, `SELECT step, worker, engine, languages, voices, seen_at FROM engine_capabilities
		WHERE seen_at > now() - $1 * interval '1 second' ORDER BY step, worker`, engine.Keep.Seconds())
	if err != nil {
		return nil, fmt.Errorf("read engine capabilities: %w", err)
	}
	var caps Capabilities
	var c engine.Capability
	var langs, voices []byte
	if _, err := pgx.ForEachRow(rows, []any{&c.Step, &c.Worker, &c.Engine, &langs, &voices, &c.SeenAt}, func() error {
		c.Languages, c.Voices = nil, nil
		if err := json.Unmarshal(langs, &c.Languages); err != nil {
			return fmt.Errorf("languages of %s %s: %w", c.Step, c.Worker, err)
		}
		if voices != nil {
			if err := json.Unmarshal(voices, &c.Voices); err != nil {
				return fmt.Errorf("voices of %s %s: %w", c.Step, c.Worker, err)
			}
		}
		caps = append(caps, c)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read engine capabilities: %w", err)
	}
	return caps, nil
}
