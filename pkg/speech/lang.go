package speech

import "strings"

// languages maps ISO 639-1 codes to their ISO 639-3 codes (Apertium's
// names) and English names (for prompts).
var languages = map[string]struct{ iso3, name string }{
	"ar": {"ara", "Arabic"},
	"ca": {"cat", "Catalan"},
	"de": {"deu", "German"},
	"en": {"eng", "English"},
	"es": {"spa", "Spanish"},
	"eu": {"eus", "Basque"},
	"fr": {"fra", "French"},
	"gl": {"glg", "Galician"},
	"it": {"ita", "Italian"},
	"ja": {"jpn", "Japanese"},
	"ko": {"kor", "Korean"},
	"nl": {"nld", "Dutch"},
	"pt": {"por", "Portuguese"},
	"ru": {"rus", "Russian"},
	"zh": {"zho", "Chinese"},
}

// baseLanguage reduces a language tag to its ISO 639-1 code when it knows
// one: "en-US" → "en", "eng" → "en", "Spanish" stays "spanish".
func baseLanguage(tag string) string {
	tag = strings.ToLower(strings.TrimSpace(tag))
	if i := strings.IndexAny(tag, "-_"); i > 0 {
		tag = tag[:i]
	}
	if _, ok := languages[tag]; ok {
		return tag
	}
	for code, l := range languages {
		if l.iso3 == tag {
			return code
		}
	}
	return tag
}

// iso3 returns Apertium's three-letter code for a language tag.
func iso3(tag string) string {
	b := baseLanguage(tag)
	if l, ok := languages[b]; ok {
		return l.iso3
	}
	return b
}

// languageName returns the English name of a language tag, or the tag.
func languageName(tag string) string {
	if l, ok := languages[baseLanguage(tag)]; ok {
		return l.name
	}
	return tag
}
