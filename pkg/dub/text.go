package dub

import "github.com/dubflow/dubflow/pkg/textrule"

// Unsafe reports whether r is refused in people's text: the text rule's
// textrule.Unsafe, named here for the callers that edit dubs.
func Unsafe(r rune) bool { return textrule.Unsafe(r) }

// CheckText applies the text rule (textrule.Check) to s: nil, or an error
// naming the first refused character, its position (in characters, from 1)
// and why. ParseGlossaryCSV, CheckTerms and Redub apply it.
func CheckText(s string) error { return textrule.Check(s) }
