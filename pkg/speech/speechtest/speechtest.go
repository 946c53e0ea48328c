// Package speechtest is the conformance suite every speech engine must
// pass, in the manner of Watermill's Pub/Sub tests: one suite per kind of
// engine (TranscriberSuite, TranslatorSuite, SynthesizerSuite), run against
// the embedded tools and against the remote adapters alike. It also finds
// the shared speech fixtures and measures word error rates.
package speechtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
)

// FixturesDir returns the folder of the shared speech fixtures: the
// environment variable DUBFLOW_FIXTURES when set, else the first
// shared/fixtures/speech found walking up from the working directory. The
// test fails with an explanation when there is none.
func FixturesDir(t testing.TB) string {
	t.Helper()
	if dir := os.Getenv("DUBFLOW_FIXTURES"); dir != "" {
		if _, err := os.Stat(dir); err != nil {
			t.Fatalf("speechtest: DUBFLOW_FIXTURES=%s: %v", dir, err)
		}
		return dir
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatalf("speechtest: %v", err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		cand := filepath.Join(dir, "shared", "fixtures", "speech")
		if st, err := os.Stat(cand); err == nil && st.IsDir() {
			return cand
		}
		if filepath.Dir(dir) == dir {
			break
		}
	}
	t.Fatalf("speechtest: speech fixtures not found: set DUBFLOW_FIXTURES or put shared/fixtures/speech beside the repository (above %s)", wd)
	return ""
}

// Fixture returns the path of a fixture file, failing the test if absent.
func Fixture(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(FixturesDir(t), name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("speechtest: fixture %s: %v", name, err)
	}
	return p
}

// ReadText returns a text fixture's content.
func ReadText(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(Fixture(t, name))
	if err != nil {
		t.Fatalf("speechtest: %v", err)
	}
	return string(b)
}

// Words lower-cases s and splits it into words, dropping punctuation
// (apostrophes inside words stay).
func Words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\''
	})
}

// WER is the word error rate of hyp against ref: the word-level edit
// distance over the number of reference words (1 when ref is empty and hyp
// is not).
func WER(ref, hyp string) float64 {
	r, h := Words(ref), Words(hyp)
	if len(r) == 0 {
		if len(h) == 0 {
			return 0
		}
		return 1
	}
	prev := make([]int, len(h)+1)
	cur := make([]int, len(h)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(r); i++ {
		cur[0] = i
		for j := 1; j <= len(h); j++ {
			cost := 1
			if r[i-1] == h[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return float64(prev[len(h)]) / float64(len(r))
}
