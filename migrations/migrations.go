// Package migrations embeds dubflow's SQL migrations, applied in order by
// goose (see pkg/store.Migrate). File names are NNNNN_name.sql; numbers are
// never reused or edited once released.
package migrations

import "embed"

// FS holds every migration file.
//
//go:embed *.sql
var FS embed.FS
