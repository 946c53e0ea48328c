package admit

import (
	"fmt"
	"io"
	"os"

	"github.com/dubflow/dubflow/pkg/config"
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
