package config

import (
	"math"
	"testing"
	"time"
)

func TestChecksNameTheVariable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{AtLeast("TIMEOUT_ASR_SECONDS", 0, 1), "TIMEOUT_ASR_SECONDS 0: want at least 1"},
		{AtLeast("TIMEOUT_ASR_SECONDS", 1, 1), ""},
		{Between("ASR_CONCURRENCY", 65, 1, 64), "ASR_CONCURRENCY 65: want 1..64"},
		{Between("ASR_CONCURRENCY", 0, 1, 64), "ASR_CONCURRENCY 0: want 1..64"},
		{Between("ASR_CONCURRENCY", 64, 1, 64), ""},
		{Positive("STUCK_TASK_SECONDS", 0), "STUCK_TASK_SECONDS 0: want more than 0"},
		{Positive("STUCK_TASK_SECONDS", -1.5), "STUCK_TASK_SECONDS -1.5: want more than 0"},
		{Positive("STUCK_TASK_SECONDS", 0.2), ""},
		{NotNegative("QUEUE_RESERVATION_TIMEOUT_SECONDS", -1, "0 (off) or more"), "QUEUE_RESERVATION_TIMEOUT_SECONDS -1: want 0 (off) or more"},
		{NotNegative("QUEUE_RESERVATION_TIMEOUT_SECONDS", 0, "0 (off) or more"), ""},
		{BetweenFloat("TTS_MAX_RATE", 2.5, 1, 2), "TTS_MAX_RATE 2.5: want 1..2"},
		{BetweenFloat("TTS_MAX_RATE", math.NaN(), 1, 2), "TTS_MAX_RATE NaN: want 1..2"},
		{BetweenFloat("TTS_MAX_RATE", 2, 1, 2), ""},
	} {
		got := ""
		if c.err != nil {
			got = c.err.Error()
		}
		if got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
	}
	if got := Seconds(0.25); got != 250*time.Millisecond {
		t.Errorf("Seconds(0.25) = %v, want 250ms", got)
	}
}
