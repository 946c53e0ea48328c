package wire

import "strings"

// InvalidError reports a message that breaks the wire contract. It names the
// first offending field as a dotted path (payload.segment_ids[0]) and says
// what is wrong in words; further problems found in the same message are
// listed in More. No retry can fix such a message.
type InvalidError struct {
	// Field is the path of the offending value, empty for the whole message.
	Field string
	// Reason says what is wrong with it.
	Reason string
	// More lists further problems, each formatted as "field: reason".
	More []string
}

// Error returns "field: reason", followed by the further problems if any.
func (e *InvalidError) Error() string {
	var b strings.Builder
	b.WriteString(e.first())
	for _, m := range e.More {
		b.WriteString("; ")
		b.WriteString(m)
	}
	return b.String()
}

func (e *InvalidError) first() string {
	if e.Field == "" {
		return e.Reason
	}
	return e.Field + ": " + e.Reason
}

func invalid(field, reason string) *InvalidError {
	return &InvalidError{Field: field, Reason: reason}
}

// at returns a copy of e whose field is placed under prefix.
func (e *InvalidError) at(prefix string) *InvalidError {
	c := *e
	c.Field = joinField(prefix, e.Field)
	return &c
}

func joinField(prefix, field string) string {
	switch {
	case prefix == "":
		return field
	case field == "":
		return prefix
	case strings.HasPrefix(field, "["):
		return prefix + field
	default:
		return prefix + "." + field
	}
}
