package speech

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/dubflow/dubflow/pkg/fault"
)

// TTSService speaks the tts_service protocol (TTS_ENGINE=tts_service):
//
//	POST {BaseURL}/synthesize
//	Content-Type: application/json
//	{"text": "...", "speaker_id": "default", "language": "es"}
//
// answered with 200 and the WAV bytes (Content-Type audio/wav). The
// speaker_id is the request's Voice, else Speaker, else "default". A 2xx
// body that is not a WAV file is permanent.
type TTSService struct {
	// Remote is the service root (e.g. http://tts:8000), key and client.
	Remote
	// Speaker is the speaker_id used when a request names no voice.
	Speaker string
}

// NewTTSService returns a synthesizer for the tts_service at baseURL.
func NewTTSService(baseURL, apiKey, speaker string) *TTSService {
	return &TTSService{Remote: Remote{BaseURL: baseURL, APIKey: apiKey}, Speaker: speaker}
}

type ttsServiceRequest struct {
	Text      string `json:"text"`
	SpeakerID string `json:"speaker_id"`
	Language  string `json:"language"`
}

// Synthesize implements Synthesizer.
func (t *TTSService) Synthesize(ctx context.Context, req SynthesisRequest) (*Audio, error) {
	const op = "tts_service synthesize"
	if a := silentFor(req, "tts_service"); a != nil {
		return a, nil
	}
	speaker := firstNonEmpty(req.Voice, t.Speaker, "default")
	wav, d, err := t.postForWAV(ctx, "/synthesize",
		ttsServiceRequest{Text: req.Text, SpeakerID: speaker, Language: baseLanguage(req.Language)}, op)
	if err != nil {
		return nil, err
	}
	return &Audio{WAV: wav, Params: map[string]any{
		"engine": "tts_service", "speaker_id": speaker, "duration_ms": d.Milliseconds(),
		"target_duration_ms": req.TargetDuration.Milliseconds(),
	}}, nil
}

// OpenAISynthesizer speaks the OpenAI-compatible speech API:
// POST {BaseURL}/v1/audio/speech with {model, input, voice,
// response_format: "wav", speed}. When the line at speed 1 is longer than
// TargetDuration it asks once more, faster (speed = ratio, at most
// MaxSpeed).
type OpenAISynthesizer struct {
	// Remote is the server (its BaseURL without the /v1 path), key and
	// client.
	Remote
	// Model is the model field, e.g. "tts-1" or "kokoro".
	Model string
	// Voice is used when a request names none ("default" counts as none).
	Voice string
	// MaxSpeed bounds the speed of the second take; 1.5 when zero.
	MaxSpeed float64
}

// NewOpenAISynthesizer returns a synthesizer for the server at baseURL.
func NewOpenAISynthesizer(baseURL, apiKey, model, voice string) *OpenAISynthesizer {
	return &OpenAISynthesizer{Remote: Remote{BaseURL: baseURL, APIKey: apiKey}, Model: model, Voice: voice}
}

type speechRequest struct {
	Model          string  `json:"model"`
	Input          string  `json:"input"`
	Voice          string  `json:"voice"`
	ResponseFormat string  `json:"response_format"`
	Speed          float64 `json:"speed"`
}

// Synthesize implements Synthesizer.
func (o *OpenAISynthesizer) Synthesize(ctx context.Context, req SynthesisRequest) (*Audio, error) {
	const op = "openai speech"
	if a := silentFor(req, "openai"); a != nil {
		return a, nil
	}
	voice := req.Voice
	if voice == "" || voice == "default" {
		voice = firstNonEmpty(o.Voice, "alloy")
	}
	maxSpeed := o.MaxSpeed
	if maxSpeed <= 0 {
		maxSpeed = 1.5
	}
	if req.MaxRate >= 1 {
		maxSpeed = min(maxSpeed, req.MaxRate)
	}
	take := func(speed float64) ([]byte, int64, error) {
		wav, d, err := o.postForWAV(ctx, "/v1/audio/speech",
			speechRequest{Model: o.Model, Input: req.Text, Voice: voice, ResponseFormat: "wav", Speed: speed}, op)
		return wav, d.Milliseconds(), err
	}
	speed, takes := 1.0, 1
	wav, d0, err := take(speed)
	if err != nil {
		return nil, err
	}
	d := d0
	if target := req.TargetDuration.Milliseconds(); target > 0 && d0 > target && maxSpeed > 1 {
		speed = min(float64(d0)/float64(target), maxSpeed)
		if wav, d, err = take(speed); err != nil {
			return nil, err
		}
		takes++
	}
	return &Audio{WAV: wav, Params: map[string]any{
		"engine": "openai", "model": o.Model, "voice": voice, "speed": speed, "takes": takes,
		"default_duration_ms": d0, "duration_ms": d, "target_duration_ms": req.TargetDuration.Milliseconds(),
	}}, nil
}

// postForWAV posts request as JSON to path of a speech server
// (TTS_BASE_URL) and returns the WAV answer and its duration. A request
// that cannot be encoded, and a 2xx body that is not a WAV file, are
// permanent.
func (r *Remote) postForWAV(ctx context.Context, path string, request any, op string) ([]byte, time.Duration, error) {
	body, err := json.Marshal(request)
	if err != nil {
		return nil, 0, fault.Permanent(fmt.Errorf("%s: encode request: %w", op, err))
	}
	wav, _, err := r.send(ctx, http.MethodPost, path, bytes.NewReader(body),
		http.Header{"Content-Type": {"application/json"}, "Accept": {"audio/wav"}}, op, "TTS_BASE_URL")
	if err != nil {
		return nil, 0, err
	}
	d, err := WAVDuration(wav)
	if err != nil {
		return nil, 0, malformed(op, err)
	}
	return wav, d, nil
}

// firstNonEmpty returns the first argument that is not "".
func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
