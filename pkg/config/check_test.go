package config

import "testing"

func TestAtLeastAndBetweenNameTheVariable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{AtLeast("TIMEOUT_ASR_SECONDS", 0, 1), "TIMEOUT_ASR_SECONDS 0: want at least 1"},
		{AtLeast("TIMEOUT_ASR_SECONDS", 1, 1), ""},
		{Between("ASR_CONCURRENCY", 65, 1, 64), "ASR_CONCURRENCY 65: want 1..64"},
		{Between("ASR_CONCURRENCY", 0, 1, 64), "ASR_CONCURRENCY 0: want 1..64"},
		{Between("ASR_CONCURRENCY", 64, 1, 64), ""},
	} {
		got := ""
		if c.err != nil {
			got = c.err.Error()
		}
		if got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
	}
}
