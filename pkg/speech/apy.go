package speech

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/sync/errgroup"
)

// APy translates through the Apertium APy HTTP API:
// GET {BaseURL}/translate?langpair=eng|spa&q=...&markUnknown=no, answered
// with {"responseData":{"translatedText":...},"responseStatus":200}. APy
// takes one text per request; Translate sends up to Concurrency at once.
//
// An error status in the JSON (responseStatus, or APy's
// {"status":"error","code":400}) is classified like the HTTP status; a 2xx
// body that is not APy's shape is permanent.
type APy struct {
	// BaseURL is the APy server, e.g. http://apy:2737.
	BaseURL string
	// Concurrency bounds the requests in flight; 4 when zero.
	Concurrency int
	// Client sends the requests; one with DefaultHTTPTimeout when nil.
	Client *http.Client
}

// NewAPy returns a translator for the APy server at baseURL.
func NewAPy(baseURL string) *APy { return &APy{BaseURL: baseURL} }

type apyResponse struct {
	ResponseData *struct {
		TranslatedText *string `json:"translatedText"`
	} `json:"responseData"`
	ResponseStatus int    `json:"responseStatus"`
	ResponseDetail string `json:"responseDetails"`
}

// Translate implements Translator.
func (a *APy) Translate(ctx context.Context, texts []string, from, to string) ([]string, error) {
	out := make([]string, len(texts))
	g, gctx := errgroup.WithContext(ctx)
	limit := a.Concurrency
	if limit <= 0 {
		limit = 4
	}
	g.SetLimit(limit)
	pair := iso3(from) + "|" + iso3(to)
	for i, t := range texts {
		if t = oneLine(t); t == "" {
			continue
		}
		g.Go(func() error {
			tr, err := a.one(gctx, t, pair)
			if err != nil {
				return fmt.Errorf("text %d: %w", i, err)
			}
			out[i] = tr
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// one translates a single text.
func (a *APy) one(ctx context.Context, text, pair string) (string, error) {
	op := "apy translate " + pair
	q := url.Values{"langpair": {pair}, "q": {text}, "markUnknown": {"no"}}
	req, err := http.NewRequest(http.MethodGet, joinURL(a.BaseURL, "/translate")+"?"+q.Encode(), nil)
	if err != nil {
		return "", malformed(op, fmt.Errorf("%w (check TRANSLATE_BASE_URL)", err))
	}
	body, header, err := do(ctx, a.Client, req, op)
	if err != nil {
		if strings.Contains(err.Error(), "not installed") {
			err = fmt.Errorf("%w: %w (pick a pair the APy server has, or another TRANSLATE_ENGINE)", err, ErrUnsupportedLanguage)
		}
		return "", err
	}
	var r apyResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return "", malformed(op, err)
	}
	if r.ResponseStatus != 0 && r.ResponseStatus != http.StatusOK {
		herr := &HTTPError{StatusCode: r.ResponseStatus, Body: r.ResponseDetail}
		return "", classifyStatus(fmt.Errorf("%s: %w", op, herr), r.ResponseStatus, header)
	}
	if r.ResponseData == nil || r.ResponseData.TranslatedText == nil {
		return "", malformed(op, errors.New("no responseData.translatedText"))
	}
	return strings.TrimSpace(*r.ResponseData.TranslatedText), nil
}
