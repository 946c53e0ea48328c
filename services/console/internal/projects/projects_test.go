package projects

import (
	"errors"
	"fmt"
	"testing"

	"github.com/dubflow/dubflow/pkg/tenant"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
)

// TestTenantErrorsAnswerTheirStatus: pkg/tenant's refusals are 400, 409
// and 404 with their text; anything else is left as it is.
func TestTenantErrorsAnswerTheirStatus(t *testing.T) {
	t.Parallel()
	for err, want := range map[error]int{fmt.Errorf("name: %w", tenant.ErrInvalid): 400,
		fmt.Errorf("p1: %w", tenant.ErrExists): 409, fmt.Errorf("p2: %w", tenant.ErrNotFound): 404} {
		ae, ok := apierr.As(tenantError(err))
		if !ok || ae.Status != want || ae.Message != err.Error() {
			t.Errorf("%v: %+v, want %d", err, ae, want)
		}
	}
	other := errors.New("x")
	if tenantError(other) != other {
		t.Error("another error was changed")
	}
}
