package worker

import (
	"errors"
	"fmt"

	"github.com/dubflow/dubflow/pkg/fault"
)

// Limit turns an error that hit a configured limit into the step's
// permanent failure naming the setting: when err wraps target
// (blob.ErrTooLarge, media.ErrTooLong, ...) it becomes permanent and gains
// " (SETTING=value)", so the failed task says which limit refused it and
// at what value. Other errors pass unchanged.
func Limit(err, target error, setting string, value any) error {
	if err == nil || !errors.Is(err, target) {
		return err
	}
	return fault.Permanent(fmt.Errorf("%w (%s=%v)", err, setting, value))
}
