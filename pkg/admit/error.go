package admit

import (
	"errors"
	"fmt"
)

// Kind is what a refusal means to the door that reports it.
type Kind int

const (
	// Invalid: the request is wrong (HTTP 400; dubctl exits 2).
	Invalid Kind = iota + 1
	// TooLarge: the request is over a limit (HTTP 413; dubctl exits 2).
	TooLarge
	// Unavailable: the request could not be judged now, e.g. ffprobe
	// did not finish (HTTP 503; dubctl exits 1). Trying again may help.
	Unavailable
)

// String names the kind.
func (k Kind) String() string {
	switch k {
	case Invalid:
		return "invalid"
	case TooLarge:
		return "too large"
	case Unavailable:
		return "unavailable"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Error is a refusal. Its text — "field: reason", or `field "value":
// reason` — is the same at every door that refuses the same input.
type Error struct {
	// Field is what was refused: source, target, speaker, glossary,
	// video.
	Field string
	// Value is the refused value when it helps to name it (a language),
	// shortened to maxValueRunes; "" otherwise.
	Value string
	// Reason says why, in words a user acts on.
	Reason string
	// Kind tells the door how to answer.
	Kind Kind
	// Err is the cause, when there is one (unwrapped, not shown).
	Err error
}

// maxValueRunes bounds the refused value an Error repeats.
const maxValueRunes = 40

// Error implements error.
func (e *Error) Error() string {
	if e.Value != "" {
		return fmt.Sprintf("%s %q: %s", e.Field, e.Value, e.Reason)
	}
	return e.Field + ": " + e.Reason
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// As returns the refusal err holds, if any.
func As(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// refuse builds an Error of kind Invalid.
func refuse(field, value, reason string) *Error {
	return &Error{Field: field, Value: shorten(value), Reason: reason, Kind: Invalid}
}

// shorten cuts s to maxValueRunes, marking the cut.
func shorten(s string) string {
	if r := []rune(s); len(r) > maxValueRunes {
		return string(r[:maxValueRunes]) + "…"
	}
	return s
}
