// Package admittest helps tests of the doors that admit tasks: it
// announces what this machine's embedded engines can do, as the asr,
// translate and tts workers do when they start.
package admittest

import (
	"context"
	"testing"

	"github.com/dubflow/dubflow/pkg/admit"
	"github.com/dubflow/dubflow/pkg/engine"
	"github.com/dubflow/dubflow/pkg/speech"
	"github.com/dubflow/dubflow/pkg/wire"
)

// DB is what AnnounceInstalled writes and reads through.
type DB interface {
	engine.Execer
	admit.Querier
}

// AnnounceInstalled announces the installed pocketsphinx (asr), apertium
// (translate) and espeak-ng (tts, with its voices) in db and returns the capabilities a door
// loads from it then.
func AnnounceInstalled(t testing.TB, db DB) admit.Capabilities {
	t.Helper()
	ctx := context.Background()
	for _, e := range []struct {
		step, engine string
		of           any
	}{{wire.StepASR, "pocketsphinx", speech.NewPocketsphinx()}, {wire.StepTranslate, "apertium", speech.NewApertium()},
		{wire.StepTTS, "espeak", speech.NewEspeak()}} {
		langs, err := speech.Capabilities(ctx, e.of)
		if err != nil {
			t.Fatalf("%s capabilities: %v", e.engine, err)
		}
		c := engine.Capability{Step: e.step, Worker: e.step + "-test", Engine: e.engine, Languages: langs}
		if e.step == wire.StepTTS {
			if c.Voices, err = speech.Voices(ctx, e.of); err != nil {
				t.Fatalf("%s voices: %v", e.engine, err)
			}
		}
		if err := engine.Announce(ctx, db, c); err != nil {
			t.Fatal(err)
		}
	}
	caps, err := admit.LoadCapabilities(ctx, db)
	if err != nil || len(caps) != 3 {
		t.Fatalf("capabilities %+v, %v", caps, err)
	}
	return caps
}
