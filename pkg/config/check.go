package config

import (
	"fmt"
	"math"
	"time"
)

// AtLeast is an error naming the variable when its value v is below min,
// nil otherwise (errors.Join drops it).
func AtLeast[N ~int | ~int64](name string, v, min N) error {
	if v < min {
		return fmt.Errorf("%s %d: want at least %d", name, v, min)
	}
	return nil
}

// Between is an error naming the variable when its value v is outside
// lo..hi, nil otherwise.
func Between(name string, v, lo, hi int) error {
	if v < lo || v > hi {
		return fmt.Errorf("%s %d: want %d..%d", name, v, lo, hi)
	}
	return nil
}

// Positive is an error naming the variable when its value v is 0 or less,
// nil otherwise.
func Positive(name string, v float64) error {
	if v <= 0 {
		return fmt.Errorf("%s %v: want more than 0", name, v)
	}
	return nil
}

// NotNegative is an error naming the variable when its value v is below 0,
// nil otherwise; want says what 0 means ("0 or more", "0 (off) or more").
func NotNegative(name string, v float64, want string) error {
	if v < 0 {
		return fmt.Errorf("%s %v: want %s", name, v, want)
	}
	return nil
}

// BetweenFloat is an error naming the variable when its value v is outside
// lo..hi (or not a number), nil otherwise.
func BetweenFloat(name string, v, lo, hi float64) error {
	if v < lo || v > hi || math.IsNaN(v) {
		return fmt.Errorf("%s %v: want %v..%v", name, v, lo, hi)
	}
	return nil
}

// Seconds is a number of seconds, fractional ones too, as a duration.
func Seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
