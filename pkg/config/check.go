package config

import "fmt"

// AtLeast is an error naming the variable when its value v is below min,
// nil otherwise (errors.Join drops it).
func AtLeast(name string, v, min int) error {
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
