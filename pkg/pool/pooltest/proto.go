package pooltest

import (
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dubflow/dubflow/pkg/speech"
	"github.com/dubflow/dubflow/pkg/speech/speechtest"
)

// Transcript is the text the fake transcription answers for any audio.
const Transcript = "Good morning everyone."

// msPerChar is how long the fake speech speaks a character.
const msPerChar = 60

// call is one decoded request: its units and how to answer it.
type call struct {
	units int
	reply func(w http.ResponseWriter)
}

// decode reads a request of one of the protocols the fake speaks.
func decode(w http.ResponseWriter, r *http.Request) (call, bool) {
	if r.Method != http.MethodPost || r.Header.Get("Authorization") != "Bearer "+Key {
		http.Error(w, "bad method or key", http.StatusUnauthorized)
		return call{}, false
	}
	var c call
	var err error
	switch r.URL.Path {
	case "/v1/chat/completions":
		c, err = chat(r)
	case "/v1/audio/transcriptions":
		c, err = transcription(r)
	case "/v1/audio/speech":
		c, err = spoken(r, "input")
	case "/synthesize":
		c, err = spoken(r, "text")
	default:
		http.Error(w, "no such path", http.StatusNotFound)
		return c, false
	}
	if err != nil {
		http.Error(w, `{"error":{"message":"bad request: `+err.Error()+`"}}`, http.StatusBadRequest)
		return c, false
	}
	return c, true
}

// chat reads a chat completions request (the texts are the JSON array
// ending its prompt, as speech.ChatTranslator asks) and answers every text
// prefixed "ES: ".
func chat(r *http.Request) (call, error) {
	var req struct {
		Messages []struct{ Role, Content string }
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
		return call{}, errOr(err, "no messages")
	}
	prompt := req.Messages[len(req.Messages)-1].Content
	var texts []string
	if err := json.Unmarshal([]byte(prompt[strings.LastIndex(prompt, "\n\n[")+2:]), &texts); err != nil {
		return call{}, err
	}
	n := 0
	out := make([]string, len(texts))
	for i, s := range texts {
		n += utf8.RuneCountInString(s)
		out[i] = "ES: " + s
	}
	arr, _ := json.Marshal(out)
	return call{units: n, reply: func(w http.ResponseWriter) {
		writeJSON(w, map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]string{"role": "assistant", "content": string(arr)}}},
		})
	}}, nil
}

// transcription reads a multipart transcription request and answers
// verbose_json with one segment of Transcript over the audio; its units
// are the audio's seconds, rounded up.
func transcription(r *http.Request) (call, error) {
	if err := r.ParseMultipartForm(64 << 20); err != nil {
		return call{}, err
	}
	if r.FormValue("response_format") != "verbose_json" {
		return call{}, errOr(nil, "response_format is not verbose_json")
	}
	f, _, err := r.FormFile("file")
	if err != nil {
		return call{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return call{}, err
	}
	d, err := speech.WAVDuration(b)
	if err != nil {
		return call{}, err
	}
	sec := d.Seconds()
	return call{units: int(math.Ceil(sec)), reply: func(w http.ResponseWriter) {
		writeJSON(w, map[string]any{"text": Transcript, "segments": []any{
			map[string]any{"start": sec * 0.1, "end": sec * 0.9, "text": Transcript}}})
	}}, nil
}

// spoken reads a speech request (OpenAI's "input", tts_service's "text")
// and answers a WAV of msPerChar per character; its units are characters.
func spoken(r *http.Request, field string) (call, error) {
	var req map[string]any
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		return call{}, err
	}
	text, _ := req[field].(string)
	if text == "" {
		return call{}, errOr(nil, "no "+field)
	}
	n := utf8.RuneCountInString(text)
	return call{units: n, reply: func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "audio/wav")
		_, _ = w.Write(speechtest.WAV(time.Duration(n*msPerChar)*time.Millisecond, false))
	}}, nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// errOr is err, or an error saying what when err is nil.
func errOr(err error, what string) error {
	if err != nil {
		return err
	}
	return errors.New(what)
}
