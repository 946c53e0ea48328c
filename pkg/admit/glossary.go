package admit

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/glossary"
	"github.com/dubflow/dubflow/pkg/wire"
)

// GlossaryFile reads a glossary file (dubctl's --glossary) as the text of
// Request.Glossary: "" for path "", at most MaxGlossaryBytes (more is
// refused as TooLarge without reading on). Check parses it.
func GlossaryFile(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", &Error{Field: "glossary", Reason: "cannot read the file", Kind: Invalid, Err: err}
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxGlossaryBytes+1))
	if err != nil {
		return "", &Error{Field: "glossary", Reason: "cannot read the file", Kind: Invalid, Err: err}
	}
	if len(b) > MaxGlossaryBytes {
		return "", &Error{Field: "glossary", Reason: fmt.Sprintf("more than %d bytes", MaxGlossaryBytes), Kind: TooLarge}
	}
	return string(b), nil
}

// LimitsOf returns the media limits of the shared configuration
// (MAX_VIDEO_BYTES, MAX_VIDEO_SECONDS).
func LimitsOf(l config.Limits) Limits {
	return Limits{MaxBytes: l.MaxVideoBytes, MaxSeconds: l.MaxVideoSeconds}
}

// Glossary checks a glossary that arrived as terms rather than CSV text
// (an outside publisher's extract_audio payload; the doors send CSV, which
// Check parses) by the rules the CSV parser applies: each term follows the
// text rule (textrule.Check) and no source term is given twice. The
// refusal names the term by its position, from 1.
func Glossary(terms []wire.Term) error {
	if err := glossary.CheckTerms(terms); err != nil {
		return &Error{Field: "glossary", Reason: strings.TrimPrefix(err.Error(), glossary.ErrInvalid.Error()+": "),
			Kind: Invalid, Err: err}
	}
	return nil
}
