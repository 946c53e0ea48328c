package admin

import (
	"cmp"
	"context"
	"fmt"
	"io"

	"github.com/dubflow/dubflow/pkg/setting"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/spf13/cobra"
)

// configurer reads and changes the run-time settings (pkg/setting), in
// either mode: the same rows, the same check, the same text.
type configurer interface {
	Settings(ctx context.Context) ([]setting.Setting, error)
	SetSetting(ctx context.Context, key, value string) (setting.Setting, error)
}

// configCmd is `dubctl config get|set`.
func (rm room) configCmd() *cobra.Command {
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
	cmd.AddCommand(rm.configGetCmd(), rm.configSetCmd())
	return cmd
}

func (rm room) configGetCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "get [KEY] [--json]",
		Short: "Show every setting, or one, with its value in force, bounds and description",
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.MaximumNArgs(1)(cmd, args); err != nil {
				return cli.UsageError(err)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return rm.open(cmd, func(ctx context.Context, c Backend) error {
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

func (rm room) configSetCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "set KEY VALUE [--json]",
		Short: "Change a setting; running services take it within 5 s",
		Args:  cli.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return rm.open(cmd, func(ctx context.Context, c Backend) error {
				s, err := c.SetSetting(ctx, args[0], args[1])
				if err != nil {
					return err
				}
				if asJSON {
					return cli.WriteJSON(cmd.OutOrStdout(), s)
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

// printSettings writes the settings as a table (one KEY: with its
// description) or as JSON.
func printSettings(w io.Writer, list []setting.Setting, asJSON bool) error {
	if asJSON {
		if len(list) == 1 {
			return cli.WriteJSON(w, list[0])
		}
		return cli.WriteJSON(w, list)
	}
	t := cli.NewTable(w, "KEY", "VALUE", "DEFAULT", "RANGE", "UNIT", "UPDATED BY")
	for _, s := range list {
		by := s.UpdatedBy
		if s.UpdatedAt == nil {
			by = "(not seeded: the default)"
		}
		t.Row(s.Key, s.Value, s.Default, fmt.Sprintf("%v..%v", s.Constraints.Min, s.Constraints.Max), cmp.Or(s.Unit, "-"), by)
	}
	if err := t.Flush(); err != nil {
		return err
	}
	if len(list) == 1 {
		_, err := fmt.Fprintf(w, "\n%s\nSeeded from %s; used by %v.\n", list[0].Description, list[0].Env, list[0].UsedBy)
		return err
	}
	return nil
}
