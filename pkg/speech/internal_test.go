package speech

import (
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

const sphinxOut = `and then our my arm arrow
<s> 0.000 0.040 0.998900
and 0.050 0.160 0.032758
then 0.170 0.670 0.213530
our(3) 0.680 0.980 0.207841
[NOISE] 0.990 1.000 0.5
</s> 2.310 2.440 1.000000
and not
<s> 3.170 3.280 1.000300
and(2) 3.290 3.730 0.985603
<sil> 3.740 3.980 0.828680
not 3.990 4.300 1.817730
++BREATH++ 4.300 4.310 0.5
</s> 4.310 4.760 1.000000
`

func TestParsePocketsphinx(t *testing.T) {
	segs := parsePocketsphinx(sphinxOut, 9000)
	if len(segs) != 2 {
		t.Fatalf("got %d segments: %+v", len(segs), segs)
	}
	if segs[0].Text != "and then our" || segs[0].StartMS != 50 || segs[0].EndMS != 980 {
		t.Errorf("segment 0: %+v", segs[0])
	}
	if segs[1].Text != "and not" || segs[1].Words[1].Confidence != 1 {
		t.Errorf("segment 1: %+v", segs[1])
	}
	// Split at the widest pause (the <sil> between "and" and "not").
	split := parsePocketsphinx(sphinxOut, 500)
	if len(split) != 5 || split[4].Text != "not" {
		t.Errorf("split: %+v", split)
	}
	if got := parsePocketsphinx("", 9000); len(got) != 0 {
		t.Errorf("empty output: %+v", got)
	}
}

func FuzzParsePocketsphinx(f *testing.F) {
	f.Add(sphinxOut, 9000)
	f.Add("<s> 0 1 1\nword(2) 1e3 2e3 0.5\n</s> 1 2 1\n", 100)
	f.Add("a NaN Inf -1\nb 1 0 0\n", 1)
	f.Fuzz(func(t *testing.T, out string, maxMS int) {
		if maxMS < 1 {
			maxMS = 1
		}
		for _, s := range parsePocketsphinx(out, maxMS) {
			if len(s.Words) == 0 || s.Text == "" || s.EndMS < s.StartMS {
				t.Fatalf("bad segment %+v", s)
			}
			for _, w := range s.Words {
				if w.Text == "" || strings.ContainsAny(w.Text[:1], "<[") || strings.HasPrefix(w.Text, "++") || w.EndMS < w.StartMS || w.Confidence < 0 || w.Confidence > 1 {
					t.Fatalf("bad word %+v", w)
				}
				if w.StartMS < s.StartMS || w.EndMS > s.EndMS {
					t.Fatalf("word %+v outside segment [%d, %d]", w, s.StartMS, s.EndMS)
				}
			}
		}
	})
}

func TestSplitText(t *testing.T) {
	cases := []struct {
		in   string
		max  int
		want []string
	}{
		{"short", 10, []string{"short"}},
		{"One. Two. Three.", 10, []string{"One. Two.", "Three."}},
		{"aaaaaaaaaaaa", 5, []string{"aaaaa", "aaaaa", "aa"}},
		{"你好。我很好！谢谢", 3, []string{"你好。", "我很好", "！谢谢"}},
		{"a b c d e f", 4, []string{"a b", "c d", "e f"}},
	}
	for _, c := range cases {
		got := splitText(c.in, c.max)
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("splitText(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}

func FuzzSplitText(f *testing.F) {
	f.Add("Hello there. How are you? Fine!", 10)
	f.Add("一二三四五。六七", 2)
	f.Fuzz(func(t *testing.T, s string, max int) {
		if max < 1 || max > 1000 || !utf8.ValidString(s) {
			return
		}
		pieces := splitText(s, max)
		for _, p := range pieces {
			if utf8.RuneCountInString(p) > max {
				t.Fatalf("piece %q longer than %d", p, max)
			}
		}
		if strings.Join(strings.Fields(strings.Join(pieces, "")), "") != strings.Join(strings.Fields(s), "") {
			t.Fatalf("pieces %q lose text of %q", pieces, s)
		}
	})
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"7": 7 * time.Second,
		"0": 0,
		now.Add(90 * time.Second).Format(http.TimeFormat): 90 * time.Second,
		now.Add(-time.Minute).Format(http.TimeFormat):     0,
	} {
		if got, ok := retryAfter(v, now); !ok || got != want {
			t.Errorf("retryAfter(%q) = %v, %v; want %v", v, got, ok, want)
		}
	}
	for _, v := range []string{"", "soon", "-3"} {
		if _, ok := retryAfter(v, now); ok {
			t.Errorf("retryAfter(%q) accepted", v)
		}
	}
}

func TestParseTranslations(t *testing.T) {
	for in, want := range map[string]string{
		`["a","b"]`:                        "a|b",
		"```json\n[\"a\", \"b\"]\n```":     "a|b",
		"```\n[\"a\",\"b\"]```":            "a|b",
		"Here you go: [\" a \", \"b\"] ok": "a|b",
	} {
		got, err := parseTranslations(in, 2)
		if err != nil || strings.Join(got, "|") != want {
			t.Errorf("parseTranslations(%q) = %q, %v", in, got, err)
		}
	}
	if got, err := parseTranslations("Hola", 1); err != nil || got[0] != "Hola" {
		t.Errorf("plain single: %q, %v", got, err)
	}
	if _, err := parseTranslations(`["a"]`, 2); err == nil {
		t.Error("short array accepted")
	}
	if _, err := parseTranslations("no idea", 2); err == nil {
		t.Error("prose accepted")
	}
}

func TestWAVDuration(t *testing.T) {
	w := silentWAV(1500 * time.Millisecond)
	if d, err := WAVDuration(w); err != nil || d != 1500*time.Millisecond {
		t.Errorf("got %v, %v", d, err)
	}
	// A streaming writer's header (size 0xFFFFFFFF): the bytes present count.
	s := append([]byte(nil), w...)
	copy(s[40:], []byte{0xff, 0xff, 0xff, 0xff})
	if d, err := WAVDuration(s); err != nil || d != 1500*time.Millisecond {
		t.Errorf("streaming header: %v, %v", d, err)
	}
	if _, err := WAVDuration([]byte("RIFF....WAVEjunk")); err == nil {
		t.Error("junk accepted")
	}
}

func TestLanguages(t *testing.T) {
	for in, want := range map[string]string{"en": "eng", "en-US": "eng", "ES": "spa", "spa": "spa", "xx": "xx"} {
		if got := iso3(in); got != want {
			t.Errorf("iso3(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestErrorSnippetIsCleanTextAtAnyLength: an engine's error body with NULs
// or invalid UTF-8 becomes text Postgres can store, short or long.
func TestErrorSnippetIsCleanTextAtAnyLength(t *testing.T) {
	for _, body := range []string{"bad\x00req\xff", strings.Repeat("x\x00\xfe ", 500)} {
		s := snippet([]byte(body))
		if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
			t.Errorf("snippet(%q...) = %q", body[:min(len(body), 12)], s)
		}
		if !strings.Contains(s, "\uFFFD") {
			t.Errorf("snippet(%q...) = %q: the bad bytes should show", body[:min(len(body), 12)], s)
		}
	}
}

// TestPocketsphinxSearch: the search setting becomes the decoder's flags
// (the default when empty, none for "default"), and a setting that is not
// flag-value pairs, or that sets what Transcribe sets, is refused.
func TestPocketsphinxSearch(t *testing.T) {
	for search, want := range map[string]string{
		"":                DefaultPocketsphinxSearch,
		"default":         "",
		" -beam  1e-40 ":  "-beam 1e-40",
		"-maxhmmpf 10000": "-maxhmmpf 10000",
	} {
		if got := strings.Join((&Pocketsphinx{Search: search}).searchArgs(), " "); got != want {
			t.Errorf("search %q: args %q, want %q", search, got, want)
		}
		if err := CheckPocketsphinxSearch(search); err != nil {
			t.Errorf("search %q refused: %v", search, err)
		}
	}
	for _, bad := range []string{"-beam", "beam 1e-40", "-infile /etc/passwd", "-logfn x -beam 1", "-dither yes", "-debug 9"} {
		if err := CheckPocketsphinxSearch(bad); err == nil || !strings.Contains(err.Error(), "POCKETSPHINX_SEARCH") {
			t.Errorf("search %q: error %v, want one naming POCKETSPHINX_SEARCH", bad, err)
		}
	}
}

// A decoder loaded in process takes no flag that sets the library's
// process-wide state (the log file, the debug level, the dither's random
// generator): the other decoders of the process share it.
func TestLoadedDecodersRefuseProcessWideFlags(t *testing.T) {
	for _, flag := range []string{"-logfn", "-debug", "-dither"} {
		args := []string{"-beam", "1e-40", flag, "x"}
		if err := psCheckArgs(args); err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("%v: %v, want %s refused", args, err, flag)
		}
		if residentLoaded {
			if d, err := newPSDecoder(args); err == nil {
				d.free()
				t.Errorf("a decoder loaded with %v", args)
			}
		}
	}
	if err := psCheckArgs([]string{"-beam", "1e-40", "-rawlogdir", "/tmp"}); err != nil {
		t.Errorf("search flags refused: %v", err)
	}
}

// TestChunkerParts: audio is cut into chunks of at most ChunkSeconds, and
// into Concurrency chunks of at least 20 s when it is shorter than that;
// more chunks come in multiples of Concurrency while they stay ≥ 20 s.
func TestChunkerParts(t *testing.T) {
	const rate = 16000
	for _, c := range []struct {
		seconds, chunk, concurrency, want int
	}{
		{11, 60, 2, 1},   // too short to split
		{39, 60, 2, 1},   // two chunks would be under 20 s
		{44, 60, 2, 2},   // two of 22 s
		{44, 60, 1, 1},   // no concurrency: one chunk up to 72 s
		{72, 60, 1, 1},   // a fifth over the target still goes whole
		{73, 60, 1, 2},   // beyond it, cut
		{100, 60, 4, 4},  // four of 25 s
		{600, 60, 2, 10}, // ten of 60 s
		{540, 60, 2, 10}, // nine would leave the last alone: ten of 54 s
		{601, 60, 2, 12}, // eleven → twelve of 50 s
		{250, 60, 4, 8},  // five → eight of 31 s, two rounds of four
		{90, 20, 4, 5},   // eight would be under 20 s
		{130, 60, 4, 4},  // three, but four cores: four of 32 s
		{190, 60, 1, 4},  // no concurrency: no rounding
		{44, 30, 2, 2},
	} {
		ch := &Chunker{ChunkSeconds: c.chunk, Concurrency: c.concurrency}
		if got := ch.parts(c.seconds*rate, rate); got != c.want {
			t.Errorf("%d s in %d s chunks, concurrency %d: %d parts, want %d", c.seconds, c.chunk, c.concurrency, got, c.want)
		}
	}
}
