package speech

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// OpenAITranscriber speaks the OpenAI-compatible transcription API:
// POST {BaseURL}/v1/audio/transcriptions, multipart with file, model,
// language, response_format=verbose_json and
// timestamp_granularities[]=segment. whisper.cpp's server (with
// --inference-path /v1/audio/transcriptions), speaches/faster-whisper and
// OpenAI answer it with segments timed in seconds.
type OpenAITranscriber struct {
	// Remote is the server (its BaseURL without the /v1 path, e.g.
	// http://whisper:8080), key and client.
	Remote
	// Model is the model field, e.g. "whisper-1" or "Systran/faster-whisper-small".
	Model string
}

// NewOpenAITranscriber returns a transcriber for the server at baseURL.
func NewOpenAITranscriber(baseURL, apiKey, model string) *OpenAITranscriber {
	return &OpenAITranscriber{Remote: Remote{BaseURL: baseURL, APIKey: apiKey}, Model: model}
}

// verboseJSON is the verbose_json transcription response.
type verboseJSON struct {
	Text     string `json:"text"`
	Segments []struct {
		Start float64 `json:"start"`
		End   float64 `json:"end"`
		Text  string  `json:"text"`
	} `json:"segments"`
	Words []struct {
		Word        string  `json:"word"`
		Start       float64 `json:"start"`
		End         float64 `json:"end"`
		Probability float64 `json:"probability"`
	} `json:"words"`
}

// Transcribe implements Transcriber. The file is streamed into the request
// body, not loaded whole. A 2xx body that is not verbose_json (no segments
// array) is a permanent error: the server does not speak this protocol.
func (o *OpenAITranscriber) Transcribe(ctx context.Context, wavPath, language string) ([]Segment, error) {
	const op = "openai transcription"
	f, err := os.Open(wavPath)
	if err != nil {
		return nil, fmt.Errorf("%s: open %s: %w", op, wavPath, err)
	}
	defer f.Close()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		pw.CloseWithError(writeTranscriptionForm(mw, f, filepath.Base(wavPath), o.Model, baseLanguage(language)))
	}()
	body, _, err := o.send(ctx, http.MethodPost, "/v1/audio/transcriptions", pr,
		http.Header{"Content-Type": {mw.FormDataContentType()}}, op, "ASR_BASE_URL")
	pr.Close()
	if err != nil {
		return nil, err
	}
	var v verboseJSON
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&v); err != nil {
		return nil, malformed(op, err)
	}
	if v.Segments == nil && strings.TrimSpace(v.Text) != "" {
		return nil, malformed(op, fmt.Errorf("text without segments (is response_format=verbose_json supported?)"))
	}
	var segs []Segment
	for _, s := range v.Segments {
		text := oneLine(s.Text)
		if text == "" || !finite(s.Start, s.End) || s.Start < 0 || s.End < s.Start {
			continue
		}
		seg := Segment{StartMS: ms(s.Start), EndMS: ms(s.End), Text: text}
		for _, w := range v.Words {
			if w.Start >= s.Start && w.Start < s.End && finite(w.Start, w.End) && w.End >= w.Start {
				seg.Words = append(seg.Words, Word{StartMS: ms(w.Start), EndMS: ms(w.End), Text: strings.TrimSpace(w.Word), Confidence: math.Max(0, math.Min(1, w.Probability))})
			}
		}
		segs = append(segs, seg)
	}
	return segs, nil
}

// writeTranscriptionForm writes the multipart form of a transcription request.
func writeTranscriptionForm(mw *multipart.Writer, audio io.Reader, name, model, language string) error {
	fields := [][2]string{{"model", model}, {"response_format", "verbose_json"}, {"timestamp_granularities[]", "segment"}}
	if language != "" {
		fields = append(fields, [2]string{"language", language})
	}
	for _, kv := range fields {
		if err := mw.WriteField(kv[0], kv[1]); err != nil {
			return err
		}
	}
	part, err := mw.CreateFormFile("file", name)
	if err != nil {
		return err
	}
	if _, err := io.Copy(part, audio); err != nil {
		return err
	}
	return mw.Close()
}

// ms converts seconds to whole milliseconds.
func ms(sec float64) int { return int(math.Round(sec * 1000)) }
