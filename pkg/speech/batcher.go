package speech

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/dubflow/dubflow/pkg/fault"
)

// Batcher is a Translator that sends texts to Engine in batches of
// BatchSize and checks that each batch comes back with the same number of
// translations. A batch that fails (an error, or a different count) is
// translated again one text at a time, each with up to ItemMaxRetries
// tries, so that one text the engine chokes on does not sink its
// neighbours. Texts longer than MaxTextLength characters are split at
// sentence boundaries (else at spaces), translated piece by piece and
// joined again.
//
// A rate limit (an error carrying fault.RetryAfter) or a cancelled context
// is returned at once: hammering a limited engine with single items does
// not help. A text whose tries are all used up fails the whole call with
// its last error, which keeps its class.
type Batcher struct {
	// Engine does the translating.
	Engine Translator
	// BatchSize is the number of texts per engine call; 20 when zero.
	BatchSize int
	// ItemMaxRetries is the number of tries of one text after its batch
	// failed; 3 when zero.
	ItemMaxRetries int
	// MaxTextLength is the longest text, in characters, sent in one
	// piece; no limit when zero.
	MaxTextLength int
	// RetryDelay is waited between the tries of one text; none when zero.
	RetryDelay time.Duration
}

// Translate implements Translator.
func (b *Batcher) Translate(ctx context.Context, texts []string, from, to string) ([]string, error) {
	// Flatten: each text becomes one or more pieces.
	var pieces []string
	var owner []int // owner[p] is the text of piece p
	for i, t := range texts {
		for _, p := range splitText(t, b.MaxTextLength) {
			pieces = append(pieces, p)
			owner = append(owner, i)
		}
	}
	size := b.BatchSize
	if size <= 0 {
		size = 20
	}
	done := make([]string, len(pieces))
	for lo := 0; lo < len(pieces); lo += size {
		hi := min(lo+size, len(pieces))
		if err := b.batch(ctx, pieces[lo:hi], done[lo:hi], from, to, lo); err != nil {
			return nil, err
		}
	}
	out := make([]string, len(texts))
	sep := " "
	if l := baseLanguage(to); l == "zh" || l == "ja" {
		sep = ""
	}
	for p, tr := range done {
		if out[owner[p]] != "" && tr != "" {
			out[owner[p]] += sep
		}
		out[owner[p]] += tr
	}
	return out, nil
}

// batch translates one batch into dst, falling back to single items.
func (b *Batcher) batch(ctx context.Context, src, dst []string, from, to string, offset int) error {
	got, batchErr := b.Engine.Translate(ctx, src, from, to)
	if batchErr == nil && len(got) != len(src) {
		batchErr = fmt.Errorf("%d texts in, %d out: %w", len(src), len(got), ErrCountMismatch)
	}
	if batchErr == nil {
		copy(dst, got)
		return nil
	}
	if stop(ctx, batchErr) {
		return fmt.Errorf("translate batch at %d: %w", offset, batchErr)
	}
	tries := b.ItemMaxRetries
	if tries <= 0 {
		tries = 3
	}
	for i, text := range src {
		var last error
		for try := 0; try < tries; try++ {
			if try > 0 && b.RetryDelay > 0 {
				select {
				case <-ctx.Done():
					return fmt.Errorf("translate text %d: %w", offset+i, ctx.Err())
				case <-time.After(b.RetryDelay):
				}
			}
			one, err := b.Engine.Translate(ctx, []string{text}, from, to)
			if err == nil && len(one) != 1 {
				err = fmt.Errorf("1 text in, %d out: %w", len(one), ErrCountMismatch)
			}
			if err == nil {
				dst[i], last = one[0], nil
				break
			}
			last = err
			if stop(ctx, err) || fault.IsPermanent(err) {
				break
			}
		}
		if last != nil {
			return fmt.Errorf("translate text %d after its batch failed (%v): %w", offset+i, batchErr, last)
		}
	}
	return nil
}

// stop reports whether err ends the call instead of a fallback or retry.
func stop(ctx context.Context, err error) bool {
	_, limited := fault.RetryAfterHint(err)
	_, _, waiting := fault.WaitOf(err) // no engine of a pool can serve: splitting the batch does not help
	return limited || waiting || ctx.Err() != nil || errors.Is(err, context.Canceled)
}

// splitText cuts s into pieces of at most max characters (runes), at
// sentence ends where it can, else at spaces, else anywhere. max <= 0 or
// a short s gives s itself. Blank text gives one empty piece.
func splitText(s string, max int) []string {
	s = strings.TrimSpace(s)
	if max <= 0 || utf8.RuneCountInString(s) <= max {
		return []string{s}
	}
	var pieces []string
	var cur strings.Builder
	curLen := 0
	flush := func() {
		if t := strings.TrimSpace(cur.String()); t != "" {
			pieces = append(pieces, t)
		}
		cur.Reset()
		curLen = 0
	}
	for _, sent := range sentences(s) {
		n := utf8.RuneCountInString(sent)
		if curLen > 0 && curLen+n > max {
			flush()
		}
		if n <= max {
			cur.WriteString(sent)
			curLen += n
			continue
		}
		for _, w := range wordsOf(sent, max) {
			wn := utf8.RuneCountInString(w)
			if curLen > 0 && curLen+wn > max {
				flush()
			}
			cur.WriteString(w)
			curLen += wn
		}
	}
	flush()
	return pieces
}

// sentences splits s after sentence-ending punctuation, keeping every
// character (the trailing space stays with its sentence).
func sentences(s string) []string {
	var out []string
	start := 0
	rs := []rune(s)
	pos := 0 // byte offset just after rs[i]
	for i := 0; i < len(rs); i++ {
		pos += utf8.RuneLen(rs[i])
		end := false
		switch rs[i] {
		case '。', '！', '？', '；':
			end = true
		case '.', '!', '?', ';':
			end = i+1 < len(rs) && unicode.IsSpace(rs[i+1])
		}
		if !end {
			continue
		}
		for i+1 < len(rs) && unicode.IsSpace(rs[i+1]) { // the following spaces go along
			i++
			pos += utf8.RuneLen(rs[i])
		}
		out = append(out, s[start:pos])
		start = pos
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// wordsOf splits s after spaces, and cuts any word longer than max.
func wordsOf(s string, max int) []string {
	var out []string
	for len(s) > 0 {
		i := strings.IndexFunc(s, unicode.IsSpace)
		var w string
		if i < 0 {
			w, s = s, ""
		} else {
			j := i
			for j < len(s) {
				r, n := utf8.DecodeRuneInString(s[j:])
				if !unicode.IsSpace(r) {
					break
				}
				j += n
			}
			w, s = s[:j], s[j:]
		}
		for utf8.RuneCountInString(w) > max {
			rs := []rune(w)
			out = append(out, string(rs[:max]))
			w = string(rs[max:])
		}
		out = append(out, w)
	}
	return out
}
