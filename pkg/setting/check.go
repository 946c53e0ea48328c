package setting

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"unicode/utf8"
)

// ErrUnknown is the answer for a key that names no setting.
var ErrUnknown = errors.New("no such setting")

// ErrInvalid is the class of a value a setting's type or constraints
// refuse; the error's text says what is wrong, in the words of the
// database's own check (system_config_problem).
var ErrInvalid = errors.New("invalid setting value")

// invalidError is a refused value: its text is the problem alone.
type invalidError struct{ msg string }

func (e *invalidError) Error() string        { return e.msg }
func (e *invalidError) Is(target error) bool { return target == ErrInvalid }

// maxValueLength bounds a value in characters (as the database does).
const maxValueLength = 200

// The shapes of values, as the database checks them.
var (
	integerShape = regexp.MustCompile(`^-?(0|[1-9][0-9]{0,14})$`)
	numberShape  = regexp.MustCompile(`^-?(0|[1-9][0-9]{0,14})(\.[0-9]{1,9})?$`)
)

// Check returns nil when value fits the setting's type and bounds, else an
// ErrInvalid saying why, word for word as the database refuses it.
func (d Def) Check(value string) error {
	bad := func(format string, args ...any) error { return &invalidError{fmt.Sprintf(format, args...)} }
	if utf8.RuneCountInString(value) > maxValueLength {
		return bad("%s: want a value of at most %d characters", d.Key, maxValueLength)
	}
	switch d.Type {
	case Integer:
		if !integerShape.MatchString(value) {
			return bad(`%s "%s": want an integer`, d.Key, value)
		}
	case Number:
		if !numberShape.MatchString(value) {
			return bad(`%s "%s": want a number`, d.Key, value)
		}
	}
	v, err := strconv.ParseFloat(value, 64)
	if err != nil {
		return bad(`%s "%s": want a number`, d.Key, value)
	}
	if v < d.Min || v > d.Max {
		return bad("%s %s: want %s..%s", d.Key, value, bound(d.Min), bound(d.Max))
	}
	return nil
}

// bound writes a bound as the constraints' JSON holds it.
func bound(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// Constraints are what a setting's value may be, as system_config stores
// them.
type Constraints struct {
	Min float64 `json:"min"`
	Max float64 `json:"max"`
}

// Constraints returns the setting's bounds.
func (d Def) Constraints() Constraints { return Constraints{Min: d.Min, Max: d.Max} }

// constraintsJSON is the constraints column of the setting.
func (d Def) constraintsJSON() []byte {
	b, _ := json.Marshal(d.Constraints()) // two float64s: never fails
	return b
}
