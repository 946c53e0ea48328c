// Package engine records what the workers' engines can do: each asr,
// translate and tts worker announces its engine's languages (and tts its
// voices) at start and every RefreshInterval while it serves
// (engine_capabilities). The doors read the announcements to judge a task
// before they admit it (pkg/admit's LoadCapabilities); this package is the
// table's one writer, and below both the workers' wiring and the doors.
package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/jackc/pgx/v5/pgconn"
)

// Capability is what one worker announced its engine can do.
type Capability struct {
	// Step is wire.StepASR, wire.StepTranslate or wire.StepTTS.
	Step string `json:"step"`
	// Worker names the announcing process; Engine its engine (ASR_ENGINE,
	// TRANSLATE_ENGINE, TTS_ENGINE).
	Worker string `json:"worker"`
	Engine string `json:"engine"`
	// Languages: for asr the languages it hears, for tts those it speaks,
	// for translate its pairs "from|to" (speech.Pair); speech.AnyLanguage
	// for any. Codes are speech.BaseLanguage's.
	Languages []string `json:"languages"`
	// Voices (tts only): the voice names a task's speaker may be, variants
	// as "+variant" (speech.Voices), lower case; speech.AnyLanguage for
	// any. Nil: not announced (the speaker is not judged by this one).
	Voices []string  `json:"voices,omitempty"`
	SeenAt time.Time `json:"seen_at"`
}

// Steps whose engines are announced.
var announcedSteps = []string{wire.StepASR, wire.StepTranslate, wire.StepTTS}

// RefreshInterval is how often a worker renews its announcement.
const RefreshInterval = time.Minute

// Keep is how long announcements are kept before Announce removes them.
const Keep = 7 * 24 * time.Hour

// Execer runs a statement: a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Announce records what c's worker can do, as seen now, and removes
// announcements no worker renewed for Keep.
func Announce(ctx context.Context, db Execer, c Capability) error {
	if !slices.Contains(announcedSteps, c.Step) {
		return fmt.Errorf("announce capabilities: step %q: want one of %v", c.Step, announcedSteps)
	}
	langs := c.Languages
	if langs == nil {
		langs = []string{}
	}
	b, err := json.Marshal(langs)
	if err != nil {
		return fmt.Errorf("announce capabilities: %w", err)
	}
	var voices []byte
	if c.Voices != nil {
		if voices, err = json.Marshal(c.Voices); err != nil {
			return fmt.Errorf("announce capabilities: %w", err)
		}
	}
	if _, err := db.Exec(ctx, `INSERT INTO engine_capabilities (step, worker, engine, languages, voices, seen_at)
		VALUES ($1, $2, $3, $4, $5, now())
		ON CONFLICT (step, worker) DO UPDATE SET engine = EXCLUDED.engine, languages = EXCLUDED.languages,
			voices = EXCLUDED.voices, seen_at = EXCLUDED.seen_at`, c.Step, c.Worker, c.Engine, b, voices); err != nil {
		return fmt.Errorf("announce capabilities of %s %s: %w", c.Step, c.Worker, err)
	}
	if _, err := db.Exec(ctx, `DELETE FROM engine_capabilities WHERE seen_at < now() - $1 * interval '1 second'`, Keep.Seconds()); err != nil {
		return fmt.Errorf("forget old capabilities: %w", err)
	}
	return nil
}
