package queue

import (
	"strings"
	"testing"
)

func TestParseSessionID(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in, channel string
		typ         int // -1: none
		ok          bool
	}{
		{"", "", -1, true},
		{"channel_123@1", "channel_123", 1, true},
		{"web_9@0", "web_9", 0, true},
		{"550e8400-e29b-41d4-a716-446655440000", "", -1, true},
		{"nope", "", -1, false},
		{"c@x", "", -1, false},
		{"@1", "", -1, false},
		{"c@", "", -1, false},
		{"c@-1", "", -1, false},
		{"c@+1", "", -1, false},
		{"c@1@2", "", -1, false},
		{"two words@1", "", -1, false},
		{"c@1234567890", "", -1, false},
		{strings.Repeat("c", 256) + "@1", "", -1, false},
		{"550e8400e29b41d4a716446655440000", "", -1, false},
	} {
		channel, typ, err := ParseSessionID(c.in)
		if (err == nil) != c.ok {
			t.Errorf("ParseSessionID(%.40q): %v, want ok=%v", c.in, err, c.ok)
			continue
		}
		if !c.ok {
			if !strings.Contains(err.Error(), "session_id") || len(err.Error()) > 250 {
				t.Errorf("ParseSessionID(%.40q) error %q", c.in, err)
			}
			continue
		}
		gotTyp := -1
		if typ != nil {
			gotTyp = *typ
		}
		if channel != c.channel || gotTyp != c.typ {
			t.Errorf("ParseSessionID(%q) = %q, %d; want %q, %d", c.in, channel, gotTyp, c.channel, c.typ)
		}
	}
}
