package speech_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/speech"
	"github.com/dubflow/dubflow/pkg/speech/speechtest"
)

const testKey = "sk-test"

// wavOf returns d of a 16 kHz mono 16-bit tone as WAV bytes.
func wavOf(d time.Duration) []byte { return speechtest.WAV(d, false) }

// whisperServer answers /v1/audio/transcriptions like a whisper server:
// silence gives no segments, speech gives the reference text in two
// segments spread over the audio, anything else a 400.
func whisperServer(t *testing.T, reference string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/audio/transcriptions" {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+testKey {
			http.Error(w, `{"error":{"message":"bad key"}}`, http.StatusUnauthorized)
			return
		}
		if err := r.ParseMultipartForm(32 << 20); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if r.FormValue("response_format") != "verbose_json" || r.FormValue("timestamp_granularities[]") != "segment" || r.FormValue("model") == "" || r.FormValue("language") != "en" {
			http.Error(w, fmt.Sprintf("bad form %v", r.MultipartForm.Value), http.StatusBadRequest)
			return
		}
		f, _, err := r.FormFile("file")
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		audio, _ := io.ReadAll(f)
		d, err := speech.WAVDuration(audio)
		if err != nil {
			http.Error(w, `{"error":{"message":"invalid audio"}}`, http.StatusBadRequest)
			return
		}
		silent := true
		for _, c := range audio[44:] {
			silent = silent && c == 0
		}
		type seg struct {
			ID         int     `json:"id"`
			Start      float64 `json:"start"`
			End        float64 `json:"end"`
			Text       string  `json:"text"`
			NoSpeech   float64 `json:"no_speech_prob"`
			AvgLogprob float64 `json:"avg_logprob"`
		}
		segs := []seg{}
		text := ""
		if !silent {
			words := strings.Fields(reference)
			half := len(words) / 2
			sec := d.Seconds()
			segs = append(segs,
				seg{0, 0.0, sec * 0.45, " " + strings.Join(words[:half], " "), 0.01, -0.2},
				seg{1, sec * 0.5, sec * 0.95, " " + strings.Join(words[half:], " "), 0.01, -0.2})
			text = reference
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"task": "transcribe", "language": "english", "duration": d.Seconds(), "text": text, "segments": segs})
	}))
}

func TestOpenAITranscriberConformance(t *testing.T) {
	ref := speechtest.ReadText(t, "jfk.txt")
	srv := whisperServer(t, ref)
	defer srv.Close()
	speechtest.TranscriberSuite{
		Engine:   speech.NewOpenAITranscriber(srv.URL, testKey, "whisper-1"),
		Speech:   speechtest.Fixture(t, "jfk.wav"),
		Language: "en", Reference: ref, MaxWER: 0.01,
	}.Run(t)
}

func TestChunkedOpenAITranscriber(t *testing.T) {
	ref := "one two three four"
	srv := whisperServer(t, ref)
	defer srv.Close()
	// 25 s of sound in 10 s chunks: each chunk answers two segments.
	p := filepath.Join(t.TempDir(), "long.wav")
	if err := os.WriteFile(p, wavOf(25*time.Second), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &speech.Chunker{Engine: speech.NewOpenAITranscriber(srv.URL, testKey, "m"), ChunkSeconds: 10, Concurrency: 3}
	segs, err := c.Transcribe(context.Background(), p, "en")
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) < 4 || len(segs)%2 != 0 {
		t.Fatalf("got %d segments, want two per chunk", len(segs))
	}
	speechtest.CheckTimeline(t, segs, 25*time.Second)
	if last := segs[len(segs)-1]; last.EndMS < 20000 {
		t.Errorf("last segment ends at %d ms: offsets not applied", last.EndMS)
	}
}

// chatServer answers /chat/completions by prefixing every text with "ES: ".
// mode "reasoning" answers in reasoning_content inside a ```json fence;
// mode "short" drops one translation from batches of more than one.
func chatServer(t *testing.T, mode string, calls *atomic.Int32) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls != nil {
			calls.Add(1)
		}
		if r.URL.Path != "/api/paas/v4/chat/completions" || r.Header.Get("Authorization") != "Bearer "+testKey {
			http.Error(w, "bad path or key", http.StatusNotFound)
			return
		}
		var req struct {
			Model    string `json:"model"`
			Messages []struct{ Role, Content string }
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model != "glm-4-flash" || len(req.Messages) == 0 {
			http.Error(w, `{"error":{"code":"1214","message":"bad request"}}`, http.StatusBadRequest)
			return
		}
		prompt := req.Messages[len(req.Messages)-1].Content
		var texts []string
		if err := json.Unmarshal([]byte(prompt[strings.LastIndex(prompt, "\n\n[")+2:]), &texts); err != nil {
			http.Error(w, "no array in prompt: "+err.Error(), http.StatusBadRequest)
			return
		}
		out := make([]string, len(texts))
		for i, s := range texts {
			out[i] = "ES: " + s
		}
		if mode == "short" && len(out) > 1 {
			out = out[1:]
		}
		arr, _ := json.Marshal(out)
		msg := map[string]string{"role": "assistant", "content": string(arr)}
		if mode == "reasoning" {
			msg = map[string]string{"role": "assistant", "content": "", "reasoning_content": "```json\n" + string(arr) + "\n```"}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion", "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": msg}},
			"usage":   map[string]int{"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
		})
	}))
}

func TestChatTranslatorConformance(t *testing.T) {
	for _, mode := range []string{"content", "reasoning"} {
		t.Run(mode, func(t *testing.T) {
			srv := chatServer(t, mode, nil)
			defer srv.Close()
			speechtest.TranslatorSuite{
				Engine: speech.NewChatTranslator(srv.URL+"/api/paas/v4", testKey, "glm-4-flash"),
				From:   "en", To: "es",
			}.Run(t)
		})
	}
}

func TestChatTranslatorCountMismatchFallsBack(t *testing.T) {
	var calls atomic.Int32
	srv := chatServer(t, "short", &calls)
	defer srv.Close()
	chat := speech.NewChatTranslator(srv.URL+"/api/paas/v4/", testKey, "glm-4-flash")
	in := []string{"one", "two", "three"}
	_, err := chat.Translate(context.Background(), in, "en", "es")
	if !errors.Is(err, speech.ErrCountMismatch) || fault.IsPermanent(err) {
		t.Fatalf("short answer: want a transient ErrCountMismatch, got %v", err)
	}
	calls.Store(0)
	b := &speech.Batcher{Engine: chat, BatchSize: 3, ItemMaxRetries: 2}
	got, err := b.Translate(context.Background(), in, "en", "es")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, "|") != "ES: one|ES: two|ES: three" {
		t.Errorf("got %q", got)
	}
	if n := calls.Load(); n != 4 {
		t.Errorf("%d calls, want 1 batch + 3 single", n)
	}
}

// apyServer answers /translate like Apertium APy for eng|spa.
func apyServer(t *testing.T) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path != "/translate" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		if r.URL.Query().Get("langpair") != "eng|spa" {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"status": "error", "code": 400, "message": "Bad Request", "explanation": "That pair is not installed"}`)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{
			"responseData":    map[string]string{"translatedText": "ES: " + r.URL.Query().Get("q")},
			"responseDetails": nil, "responseStatus": 200,
		})
	}))
}

func TestAPyConformance(t *testing.T) {
	srv := apyServer(t)
	defer srv.Close()
	speechtest.TranslatorSuite{Engine: speech.NewAPy(srv.URL), From: "en", To: "es", Unsupported: [2]string{"en", "fr"}}.Run(t)
}

// ttsServer answers tts_service's /synthesize and OpenAI's /v1/audio/speech
// with a tone of 60 ms per character (divided by speed).
func ttsServer(t *testing.T) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var text string
		speed := 1.0
		switch r.URL.Path {
		case "/synthesize":
			var req struct {
				Text      string `json:"text"`
				SpeakerID string `json:"speaker_id"`
				Language  string `json:"language"`
			}
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.SpeakerID == "" || req.Language != "es" {
				http.Error(w, `{"detail":"bad request"}`, http.StatusUnprocessableEntity)
				return
			}
			text = req.Text
		case "/v1/audio/speech":
			var req struct {
				Model, Input, Voice string
				ResponseFormat      string  `json:"response_format"`
				Speed               float64 `json:"speed"`
			}
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Voice == "" || req.ResponseFormat != "wav" || req.Speed < 0.25 || req.Speed > 4 {
				http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
				return
			}
			text, speed = req.Input, req.Speed
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "audio/wav")
		w.Write(wavOf(time.Duration(float64(len(text)) * 60 / speed * float64(time.Millisecond))))
	}))
}

func TestTTSServiceConformance(t *testing.T) {
	srv := ttsServer(t)
	defer srv.Close()
	speechtest.SynthesizerSuite{Engine: speech.NewTTSService(srv.URL, "", "default"), Language: "es"}.Run(t)
}

func TestOpenAISynthesizerConformance(t *testing.T) {
	srv := ttsServer(t)
	defer srv.Close()
	speechtest.SynthesizerSuite{Engine: speech.NewOpenAISynthesizer(srv.URL, testKey, "tts-1", "alloy"), Language: "es"}.Run(t)
}

func TestOpenAISynthesizerFitsTarget(t *testing.T) {
	srv := ttsServer(t)
	defer srv.Close()
	s := speech.NewOpenAISynthesizer(srv.URL, testKey, "tts-1", "alloy")
	text := strings.Repeat("a", 50) // 3 s at speed 1
	a, err := s.Synthesize(context.Background(), speech.SynthesisRequest{Text: text, Language: "es", TargetDuration: 2500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if sp := a.Params["speed"].(float64); sp < 1.19 || sp > 1.21 || a.Params["duration_ms"].(int64) > 2500 {
		t.Errorf("params %v: want speed 1.2 and ≤ 2500 ms", a.Params)
	}
	a, err = s.Synthesize(context.Background(), speech.SynthesisRequest{Text: text, Language: "es", TargetDuration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if sp := a.Params["speed"].(float64); sp != 1.5 {
		t.Errorf("speed %v, want the bound 1.5", sp)
	}
}

// remoteCalls runs one request of each remote engine against base.
var remoteCalls = map[string]func(ctx context.Context, base string, c *http.Client, wav string) error{
	"openai transcription": func(ctx context.Context, base string, c *http.Client, wav string) error {
		_, err := (&speech.OpenAITranscriber{Remote: speech.Remote{BaseURL: base, Client: c}, Model: "m"}).Transcribe(ctx, wav, "en")
		return err
	},
	"chat translation": func(ctx context.Context, base string, c *http.Client, _ string) error {
		_, err := (&speech.ChatTranslator{Remote: speech.Remote{BaseURL: base, Client: c}, Model: "m"}).Translate(ctx, []string{"hi"}, "en", "es")
		return err
	},
	"apy": func(ctx context.Context, base string, c *http.Client, _ string) error {
		_, err := (&speech.APy{BaseURL: base, Client: c}).Translate(ctx, []string{"hi"}, "en", "es")
		return err
	},
	"tts_service": func(ctx context.Context, base string, c *http.Client, _ string) error {
		_, err := (&speech.TTSService{Remote: speech.Remote{BaseURL: base, Client: c}}).Synthesize(ctx, speech.SynthesisRequest{Text: "hola", Language: "es"})
		return err
	},
	"openai speech": func(ctx context.Context, base string, c *http.Client, _ string) error {
		_, err := (&speech.OpenAISynthesizer{Remote: speech.Remote{BaseURL: base, Client: c}, Model: "m"}).Synthesize(ctx, speech.SynthesisRequest{Text: "hola", Language: "es"})
		return err
	},
}

func TestRemoteErrorClasses(t *testing.T) {
	wav := filepath.Join(t.TempDir(), "a.wav")
	if err := os.WriteFile(wav, wavOf(time.Second), 0o644); err != nil {
		t.Fatal(err)
	}
	type want int
	const (
		transient want = iota
		permanent
		retryAfter
	)
	cases := []struct {
		name    string
		handler http.HandlerFunc
		want    want
	}{
		{"429 with Retry-After", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "7")
			http.Error(w, `{"error":{"code":"1302","message":"rate limit"}}`, http.StatusTooManyRequests)
		}, retryAfter},
		{"429 without Retry-After", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "slow down", http.StatusTooManyRequests)
		}, transient},
		{"500", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", 500) }, transient},
		{"503 with a malformed body", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(503)
			io.WriteString(w, "<html><body>upstream down")
		}, transient},
		{"408", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "timeout", http.StatusRequestTimeout) }, transient},
		{"400", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, `{"error":{"message":"invalid model"}}`, http.StatusBadRequest)
		}, permanent},
		{"401", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no key", http.StatusUnauthorized) }, permanent},
		{"200 with a malformed body", func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "<html><body>welcome to nginx</body></html>")
		}, permanent},
		{"timeout", func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body) // so that the server notices the client leave
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		}, transient},
	}
	for name, call := range remoteCalls {
		for _, tc := range cases {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				srv := httptest.NewServer(tc.handler)
				defer srv.Close()
				// Only the hanging server meets the client's short timeout: the
				// others answer at once, and a loaded machine must not turn
				// their answer into a timeout.
				client := &http.Client{Timeout: 30 * time.Second}
				if tc.name == "timeout" {
					client.Timeout = 200 * time.Millisecond
				}
				err := call(context.Background(), srv.URL, client, wav)
				if err == nil {
					t.Fatal("no error")
				}
				hint, hinted := fault.RetryAfterHint(err)
				switch tc.want {
				case permanent:
					if !fault.IsPermanent(err) {
						t.Errorf("want permanent, got %v", err)
					}
				case transient:
					if fault.IsPermanent(err) || hinted {
						t.Errorf("want plain transient, got %v (permanent %v, hint %v)", err, fault.IsPermanent(err), hint)
					}
				case retryAfter:
					if fault.IsPermanent(err) || hint != 7*time.Second {
						t.Errorf("want RetryAfter 7s, got %v (hint %v)", err, hint)
					}
				}
			})
		}
		t.Run(name+"/connection refused", func(t *testing.T) {
			srv := httptest.NewServer(http.NotFoundHandler())
			base := srv.URL
			srv.Close()
			err := call(context.Background(), base, nil, wav)
			if err == nil || fault.IsPermanent(err) {
				t.Errorf("want transient, got %v", err)
			}
		})
		t.Run(name+"/canceled", func(t *testing.T) {
			srv := httptest.NewServer(http.NotFoundHandler())
			defer srv.Close()
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if err := call(ctx, srv.URL, nil, wav); !errors.Is(err, context.Canceled) {
				t.Errorf("want context.Canceled, got %v", err)
			}
		})
	}
}
