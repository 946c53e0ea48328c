package config

import "time"

// TimeoutSeconds bounds one run of a worker's step, in whole seconds. A
// step worker's configuration embeds it with the step's variable
// (StepTimeoutVar) and default, and so gets Timeout and CheckTimeout:
//
//	config.TimeoutSeconds `env:"TIMEOUT_ASR_SECONDS" envDefault:"1200"`
type TimeoutSeconds int

// Timeout is the step's timeout.
func (s TimeoutSeconds) Timeout() time.Duration { return time.Duration(s) * time.Second }

// CheckTimeout is an error naming step's variable (StepTimeoutVar) when the
// timeout is under a second, nil otherwise.
func (s TimeoutSeconds) CheckTimeout(step string) error {
	return AtLeast(StepTimeoutVar(step), int(s), 1)
}
