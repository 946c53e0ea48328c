package speech_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/speech"
)

var testGlossary = []speech.Term{{Source: "weather", Target: "clima"}, {Source: "dubflow"}, {Source: "New York"}}

// TestGlossaryApertium: on the embedded engine, a term with a target is
// translated that way, a kept term stays as written, and the terms change
// nothing else; without the glossary apertium says otherwise.
func TestGlossaryApertium(t *testing.T) {
	ctx := context.Background()
	in := []string{
		"The weather in New York is good.",
		"Dubflow loves the Weather, and dubflow says so.",
		"Weatherproof boots for the dubflowing crowd.",
	}
	plain, err := speech.NewApertium().Translate(ctx, in, "en", "es")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plain[0], "tiempo") || !strings.Contains(plain[0], "Nueva York") {
		t.Fatalf("apertium without glossary: %q (the test expects 'tiempo' and 'Nueva York')", plain[0])
	}
	got, err := speech.WithGlossary(speech.NewApertium(), testGlossary).Translate(ctx, in, "en", "es")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got[0], "clima") || strings.Contains(got[0], "tiempo") || !strings.Contains(got[0], "New York") {
		t.Errorf("text 1: %q, want clima and New York", got[0])
	}
	if strings.Count(got[1], "dubflow") != 1 || strings.Count(got[1], "Dubflow") != 1 || !strings.Contains(got[1], "clima") {
		t.Errorf("text 2: %q, want Dubflow and dubflow kept as written, clima", got[1])
	}
	// Parts of words are not terms.
	if strings.Contains(got[2], "clima") || strings.Contains(got[2], "QZX") {
		t.Errorf("text 3: %q, want no term inside other words", got[2])
	}
	t.Logf("without glossary: %q\nwith glossary:    %q", plain, got)
}

// TestGlossaryChat: the chat engine gets the glossary in its prompt and
// placeholders instead of the terms; a model that drops a placeholder is a
// transient error.
func TestGlossaryChat(t *testing.T) {
	var prompt string
	drop := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct{ Role, Content string }
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		prompt = req.Messages[len(req.Messages)-1].Content
		var texts []string
		if err := json.Unmarshal([]byte(prompt[strings.LastIndex(prompt, "\n\n[")+2:]), &texts); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for i := range texts {
			texts[i] = "ES: " + texts[i]
			if drop {
				texts[i] = "ES"
			}
		}
		arr, _ := json.Marshal(texts)
		json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{
			"message": map[string]string{"role": "assistant", "content": string(arr)}}}})
	}))
	defer srv.Close()
	tr := speech.WithGlossary(speech.NewChatTranslator(srv.URL, "", "m"), testGlossary)
	got, err := tr.Translate(context.Background(), []string{"The weather in dubflow."}, "en", "es")
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != "ES: The clima in dubflow." {
		t.Errorf("got %q", got[0])
	}
	if !strings.Contains(prompt, `"weather": "clima"`) || !strings.Contains(prompt, `"dubflow": keep as it is`) ||
		strings.Contains(prompt, `["The weather`) {
		t.Errorf("prompt does not carry the glossary, or sends the term itself:\n%s", prompt)
	}
	drop = true
	_, err = tr.Translate(context.Background(), []string{"The weather."}, "en", "es")
	if err == nil || !strings.Contains(err.Error(), "placeholder") || fault.IsPermanent(err) {
		t.Errorf("a dropped placeholder: %v, want a transient error", err)
	}
}
