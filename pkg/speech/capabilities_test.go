package speech

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"testing"
)

func TestModePairsMapsModesToISO6391Pairs(t *testing.T) {
	got := modePairs([]string{"eng-spa", "spa-eng", "eng-cat", "eng-cat_valencia", "cat-eng_US", "xyz-eng"})
	want := []string{"en|ca", "en|es", "es|en", "xyz|en"} // cat-eng_US is a variant
	if !slices.Equal(got, want) {
		t.Fatalf("pairs %v, want %v", got, want)
	}
}

func TestVoiceLanguagesReadsTheLanguageColumn(t *testing.T) {
	out := "Pty Language       Age/Gender VoiceName          File                 Other Languages\n" +
		" 5  af              --/M      Afrikaans          gmw/af\n" +
		" 2  en-gb           --/M      English_(Great_Britain) gmw/en            (en 2)\n" +
		" 2  en-us           --/M      English_(America)  gmw/en-US         (en 3)\n" +
		" 5  es              --/M      Spanish_(Spain)    roa/es\n"
	if got, want := voiceLanguages(out), []string{"af", "en", "es"}; !slices.Equal(got, want) {
		t.Fatalf("languages %v, want %v", got, want)
	}
}

// TestEmbeddedEnginesAnnounceWhatIsInstalled runs the installed engines.
func TestEmbeddedEnginesAnnounceWhatIsInstalled(t *testing.T) {
	ctx := context.Background()
	if _, err := exec.LookPath("apertium"); err != nil {
		t.Fatalf("apertium is not installed (%v): `make test` installs it with the media packages (scripts/stack.sh)", err)
	}
	pairs, err := Capabilities(ctx, &Batcher{Engine: NewApertium()})
	if err != nil || !slices.Contains(pairs, "en|es") || !slices.Contains(pairs, "es|en") {
		t.Fatalf("apertium pairs %v, %v: want en|es and es|en (apertium-eng-spa)", pairs, err)
	}
	voices, err := Capabilities(ctx, NewEspeak())
	if err != nil || !slices.Contains(voices, "es") || !slices.Contains(voices, "en") || slices.Contains(voices, "tlh") {
		t.Fatalf("espeak languages %v, %v", voices, err)
	}
	asr, err := Capabilities(ctx, &Chunker{Engine: NewPocketsphinx()})
	if err != nil || !slices.Equal(asr, []string{"en"}) {
		t.Fatalf("pocketsphinx languages %v, %v", asr, err)
	}
	any, _ := Capabilities(ctx, NewChatTranslator("http://x", "", "m"))
	if !slices.Equal(any, []string{AnyLanguage}) {
		t.Fatalf("chat translator %v, want any", any)
	}
}

func TestAPyListsItsPairs(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/listPairs" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(`{"responseData":[{"sourceLanguage":"eng","targetLanguage":"spa"},{"sourceLanguage":"cat","targetLanguage":"eng_US"}],"responseStatus":200}`))
	}))
	defer srv.Close()
	got, err := NewAPy(srv.URL).Capabilities(context.Background())
	if want := []string{"ca|en", "en|es"}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("APy pairs %v, %v, want %v", got, err, want)
	}
}
