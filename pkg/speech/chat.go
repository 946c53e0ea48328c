package speech

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/dubflow/dubflow/pkg/fault"
)

// ChatTranslator translates through an OpenAI-compatible chat completions
// API: POST {BaseURL}/chat/completions. Zhipu GLM's BaseURL is
// https://open.bigmodel.cn/api/paas/v4 (model glm-4-flash); OpenAI's is
// https://api.openai.com/v1.
//
// The prompt sends the texts as a JSON array and asks for a JSON array of
// translations in the same order. The answer is read from
// message.content or, when that is empty, message.reasoning_content
// (newer GLM models); a ```json fence around it is removed.
//
// Error classes: the HTTP status decides first (see the package comment).
// A 2xx whose body is not a chat completion is permanent (wrong base URL).
// A completion whose text is not a JSON array of strings, or has the
// wrong count, is transient (wrapping ErrCountMismatch for a count): a
// model's answer varies between calls, and Batcher falls back to single
// items on it.
type ChatTranslator struct {
	// Remote is the API root that /chat/completions is appended to, the
	// key and the client.
	Remote
	// Model is the model field, e.g. "glm-4-flash".
	Model string

	// glossary is added to the prompt (WithGlossary).
	glossary []Term
}

// withGlossary returns a copy of c that tells the model the glossary.
func (c *ChatTranslator) withGlossary(terms []Term) Translator {
	cp := *c
	cp.glossary = terms
	return &cp
}

// NewChatTranslator returns a translator for the API at baseURL.
func NewChatTranslator(baseURL, apiKey, model string) *ChatTranslator {
	return &ChatTranslator{Remote: Remote{BaseURL: baseURL, APIKey: apiKey}, Model: model}
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chatRequest struct {
	Model       string        `json:"model"`
	Messages    []chatMessage `json:"messages"`
	Temperature float64       `json:"temperature"`
}

type chatResponse struct {
	Choices []struct {
		Message struct {
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
		} `json:"message"`
	} `json:"choices"`
}

// Translate implements Translator.
func (c *ChatTranslator) Translate(ctx context.Context, texts []string, from, to string) ([]string, error) {
	const op = "chat translation"
	out := make([]string, len(texts))
	var idx []int
	var items []string
	for i, t := range texts {
		if t = strings.TrimSpace(t); t != "" {
			idx = append(idx, i)
			items = append(items, t)
		}
	}
	if len(items) == 0 {
		return out, nil
	}
	input, err := json.Marshal(items)
	if err != nil {
		return nil, fault.Permanent(fmt.Errorf("%s: encode texts: %w", op, err))
	}
	reqBody, err := c.request(from, to, items, input)
	if err != nil {
		return nil, fault.Permanent(fmt.Errorf("%s: encode request: %w", op, err))
	}
	body, _, err := c.send(ctx, http.MethodPost, "/chat/completions", bytes.NewReader(reqBody),
		http.Header{"Content-Type": {"application/json"}}, op, "TRANSLATE_BASE_URL")
	if err != nil {
		return nil, err
	}
	var resp chatResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, malformed(op, err)
	}
	if len(resp.Choices) == 0 {
		return nil, malformed(op, errors.New("no choices"))
	}
	msg := resp.Choices[0].Message
	text := msg.Content
	if strings.TrimSpace(text) == "" {
		text = msg.ReasoningContent
	}
	got, err := parseTranslations(text, len(items))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	for j, i := range idx {
		out[i] = got[j]
	}
	return out, nil
}

// request builds the chat completion request for items (input: their JSON
// array), with the glossary's instructions when there is one.
func (c *ChatTranslator) request(from, to string, items []string, input []byte) ([]byte, error) {
	prompt := fmt.Sprintf("Translate each string of the JSON array below from %s to %s. "+
		"Answer with only a JSON array of %d strings: the translations, in the same order, one per input string, "+
		"without notes or explanations. Keep numbers, names and punctuation.",
		languageName(from), languageName(to), len(items))
	if len(c.glossary) > 0 {
		prompt += "\n\n" + glossaryPrompt(c.glossary)
	}
	return json.Marshal(chatRequest{
		Model: c.Model,
		Messages: []chatMessage{
			{Role: "system", Content: "You are a professional translator for video dubbing. You reply with JSON only."},
			{Role: "user", Content: prompt + "\n\n" + string(input)},
		},
		Temperature: 0.1,
	})
}

// parseTranslations reads a model's answer: a JSON array of n strings,
// possibly inside a ```json fence or after some words. A single
// translation may also come as plain text.
func parseTranslations(text string, n int) ([]string, error) {
	s := strings.TrimSpace(text)
	if strings.HasPrefix(s, "```") {
		s = strings.TrimPrefix(s, "```")
		if i := strings.IndexByte(s, '\n'); i >= 0 && !strings.HasPrefix(strings.TrimSpace(s[:i]), "[") {
			s = s[i+1:] // drop the fence's language tag
		}
		s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "```"))
	}
	var got []string
	err := json.Unmarshal([]byte(s), &got)
	if err != nil {
		if i, j := strings.IndexByte(s, '['), strings.LastIndexByte(s, ']'); i >= 0 && j > i {
			err = json.Unmarshal([]byte(s[i:j+1]), &got)
		}
	}
	if err != nil {
		if n == 1 && s != "" && !strings.HasPrefix(s, "[") {
			return []string{s}, nil
		}
		return nil, fmt.Errorf("answer is not a JSON array of strings: %q", snippet([]byte(s)))
	}
	if len(got) != n {
		return nil, fmt.Errorf("%d texts in, %d out: %w", n, len(got), ErrCountMismatch)
	}
	for i := range got {
		got[i] = strings.TrimSpace(got[i])
	}
	return got, nil
}
