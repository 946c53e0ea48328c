package database

import (
	"fmt"
	"os"
	"os/user"
	"unicode/utf8"

	"github.com/dubflow/dubflow/pkg/dub"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
)

// maxActorLength bounds --as.
const maxActorLength = 64

// ActorName is who acts in database mode, as the audit log (and a pause's
// changed_by, a purge's purged_by) names them: --as when given, else the
// operating-system user (USER, LOGNAME when the user database has none,
// else "uid N": a container's user may have no name). The console names
// its token's instead.
func ActorName(as string, getenv func(string) string) (string, error) {
	if as != "" {
		if utf8.RuneCountInString(as) > maxActorLength {
			return "", cli.UsageError(fmt.Errorf("--as: at most %d characters", maxActorLength))
		}
		if err := dub.CheckText(as); err != nil {
			return "", cli.UsageError(fmt.Errorf("--as: %w", err))
		}
		return as, nil
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username, nil
	}
	for _, k := range []string{"USER", "LOGNAME"} {
		if v := getenv(k); v != "" {
			return v, nil
		}
	}
	return fmt.Sprintf("uid %d", os.Getuid()), nil
}
