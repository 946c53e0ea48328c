package main

import (
	"context"
	"sync"

	"github.com/dubflow/dubflow/pkg/admit"
	"github.com/dubflow/dubflow/pkg/speech"
	"github.com/dubflow/dubflow/pkg/wire"
)

// voiceList judges a task's speaker by the voices of the worker's engine
// (speech.Voices), read once: the rule every door applies (admit.Speaker),
// for a message that reached no door.
type voiceList struct {
	engine any

	mu     sync.Mutex
	loaded bool
	known  admit.Capabilities
}

// check refuses a speaker that is not one of the engine's voices. While
// the engine's voices cannot be read, only the name's syntax is judged.
func (v *voiceList) check(ctx context.Context, speaker string) error {
	if v == nil || speaker == "" {
		return nil
	}
	v.mu.Lock()
	if !v.loaded {
		if voices, err := speech.Voices(ctx, v.engine); err == nil {
			v.known, v.loaded = admit.Capabilities{{Step: wire.StepTTS, Voices: voices}}, true
		}
	}
	known := v.known
	v.mu.Unlock()
	return admit.Speaker(speaker, known)
}
