package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/dubflow/dubflow/pkg/setting"
	"github.com/spf13/cobra"
)

// configurer reads and changes the run-time settings (pkg/setting), in
// either mode: the same rows, the same check, the same text.
type configurer interface {
	Settings(ctx context.Context) ([]setting.Setting, error)
	SetSetting(ctx context.Context, key, value string) (setting.Setting, error)
}

var (
	_ configurer = (*dbBackend)(nil)
	_ configurer = (*consoleBackend)(nil)
)

// configCmd is `dubctl config get|set`.
func configCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Read and change the run-time settings (seed 003's system_config)",
		Long: `config reads and changes the settings the running services read while they
run: batch sizes, concurrency, retry delays, the reservation timeout, the
stuck-task threshold, the metric retention, the bound on engine waits. Each
service seeds the ones it uses from its environment on its first start; from
then on the stored value applies, and a change reaches every running service
within 5 seconds, without a restart. A value out of bounds is refused with
the same text in both modes (and by the database itself).`,
	}
	cmd.AddCommand(configGetCmd(), configSetCmd())
	return cmd
}

func configGetCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "get [KEY] [--json]",
		Short: "Show every setting, or one, with its value in force, bounds and description",
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.MaximumNArgs(1)(cmd, args); err != nil {
				return usageError(err)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return withConfigurer(cmd, func(ctx context.Context, c configurer) error {
				list, err := c.Settings(ctx)
				if err != nil {
					return err
				}
				if len(args) == 0 {
					return printSettings(cmd.OutOrStdout(), list, asJSON)
				}
				for _, s := range list {
					if s.Key == args[0] {
						return printSettings(cmd.OutOrStdout(), []setting.Setting{s}, asJSON)
					}
				}
				return setting.Unknown(args[0])
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array (an object for one KEY)")
	return cmd
}

func configSetCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "set KEY VALUE [--json]",
		Short: "Change a setting; running services take it within 5 s",
		Args:  exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withConfigurer(cmd, func(ctx context.Context, c configurer) error {
				s, err := c.SetSetting(ctx, args[0], args[1])
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(cmd.OutOrStdout(), s)
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s = %s (running services take it within %s)\n", s.Key,
					s.Value, setting.Poll)
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the setting as JSON")
	return cmd
}

// withConfigurer runs do on the mode the environment selects.
func withConfigurer(cmd *cobra.Command, do func(ctx context.Context, c configurer) error) error {
	return withBackend(cmd, func(ctx context.Context, b backend) error {
		c, ok := b.(configurer)
		if !ok {
			return errors.New("this mode cannot read the settings")
		}
		return do(ctx, c)
	})
}

// printSettings writes the settings as a table (one KEY: with its
// description) or as JSON.
func printSettings(w io.Writer, list []setting.Setting, asJSON bool) error {
	if asJSON {
		if len(list) == 1 {
			return writeJSON(w, list[0])
		}
		return writeJSON(w, list)
	}
	t := newTable(w, "KEY", "VALUE", "DEFAULT", "RANGE", "UNIT", "UPDATED BY")
	for _, s := range list {
		by := s.UpdatedBy
		if s.UpdatedAt == nil {
			by = "(not seeded: the default)"
		}
		t.row(s.Key, s.Value, s.Default, fmt.Sprintf("%v..%v", s.Constraints.Min, s.Constraints.Max), cmp.Or(s.Unit, "-"), by)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if len(list) == 1 {
		_, err := fmt.Fprintf(w, "\n%s\nSeeded from %s; used by %v.\n", list[0].Description, list[0].Env, list[0].UsedBy)
		return err
	}
	return nil
}

// Settings lists the settings from the database.
func (d *dbBackend) Settings(ctx context.Context) ([]setting.Setting, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return nil, err
	}
	return setting.List(ctx, pool)
}

// SetSetting changes a setting in the database (setting.Set: the console's
// check and text) as who runs dubctl, and writes the audit row the console
// writes for the same change (action config, role database).
func (d *dbBackend) SetSetting(ctx context.Context, key, value string) (setting.Setting, error) {
	pool, err := d.db(ctx)
	if err != nil {
		return setting.Setting{}, err
	}
	before, _ := setting.Get(ctx, pool, key)
	s, err := setting.Set(ctx, pool, key, value, d.actor)
	if errors.Is(err, setting.ErrInvalid) {
		err = usageError(err)
	}
	a := actionOf("config", key, http.StatusOK)
	a.detail = map[string]any{"from": before.Value, "value": value}
	d.record(ctx, a, err)
	return s, err
}

// Settings reads GET /api/config.
func (c *consoleBackend) Settings(ctx context.Context) ([]setting.Setting, error) {
	var out struct {
		Settings []setting.Setting `json:"settings"`
	}
	return out.Settings, c.get(ctx, "/api/config", &out)
}

// SetSetting sends PUT /api/config/{key}.
func (c *consoleBackend) SetSetting(ctx context.Context, key, value string) (setting.Setting, error) {
	var s setting.Setting
	b, err := json.Marshal(map[string]string{"value": value})
	if err != nil {
		return s, fmt.Errorf("console PUT /api/config: %w", err)
	}
	return s, c.do(ctx, http.MethodPut, "/api/config/"+url.PathEscape(key), "application/json", bytes.NewReader(b), &s)
}
