package speaker

import (
	"slices"
	"strings"
)

// LowPitchHz divides the registers: a speaker whose median pitch is below
// it gets a low voice (typical adult male voices speak at 85–155 Hz,
// female ones at 165–255 Hz).
const LowPitchHz = 160.0

// Voices lists the synthesis voices to give speakers, by register. A name
// may hold "{lang}", replaced by the target language (espeak-ng voices are
// "<language>+<variant>").
type Voices struct {
	Low, High []string
}

// EspeakVoices are espeak-ng's male and female variants, lowest first.
var EspeakVoices = Voices{
	Low:  []string{"{lang}+m3", "{lang}+m1", "{lang}+m6", "{lang}+m2"},
	High: []string{"{lang}+f2", "{lang}+f4", "{lang}+f1", "{lang}+f5"},
}

// Assign gives each speaker of turns a voice for language: in order of
// appearance, the next voice of its register not taken yet (a speaker
// without a pitch counts as low). preferred, when not empty (a voice the
// task asked for), goes to the first speaker. A register whose voices are
// used up starts again from its first. With no voices at all, every
// speaker gets preferred.
func Assign(turns []Turn, v Voices, language, preferred string) map[string]string {
	return AssignMore(turns, nil, v, language, preferred)
}

// AssignMore is Assign for speakers found after others were given their
// voices (given): those keep theirs, and their voices count as taken.
func AssignMore(turns []Turn, given map[string]string, v Voices, language, preferred string) map[string]string {
	lang := func(list []string) []string {
		out := make([]string, len(list))
		for i, s := range list {
			out[i] = strings.ReplaceAll(s, "{lang}", language)
		}
		return out
	}
	low, high := lang(v.Low), lang(v.High)
	out := map[string]string{}
	var taken []string
	if preferred != "" {
		taken = append(taken, preferred)
	}
	for name, voice := range given {
		out[name] = voice
		taken = append(taken, voice)
	}
	for _, t := range turns {
		if _, ok := out[t.Speaker]; ok {
			continue
		}
		if len(out) == 0 && preferred != "" {
			out[t.Speaker] = preferred
			continue
		}
		list := low
		if t.PitchHz >= LowPitchHz {
			list = high
		}
		out[t.Speaker] = pick(list, taken, preferred)
		taken = append(taken, out[t.Speaker])
	}
	return out
}

// pick returns the first voice of list not taken, else the first of list,
// else fallback.
func pick(list, taken []string, fallback string) string {
	for _, v := range list {
		if !slices.Contains(taken, v) {
			return v
		}
	}
	if len(list) > 0 {
		return list[0]
	}
	return fallback
}
