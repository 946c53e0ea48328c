package admin

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/dubflow/dubflow/pkg/tenant"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// tenanter manages the projects and their tokens (pkg/tenant), in either
// mode: the same rows, the same checks, the same text and JSON.
type tenanter interface {
	CreateProject(ctx context.Context, n tenant.NewProject) (tenant.Project, error)
	Projects(ctx context.Context) ([]tenant.Project, error)
	CreateToken(ctx context.Context, n tenant.NewToken) (tenant.Created, error)
	Tokens(ctx context.Context, project string) ([]tenant.Token, error)
	RevokeToken(ctx context.Context, id uuid.UUID) (tenant.Token, error)
}

// projectCmd is `dubctl project create|list`.
func (rm room) projectCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "project",
		Short: "Create and list projects (the tenants: their tasks, tokens and engine use)",
		Long: `project creates and lists projects. Every task belongs to one (the local
stack's is "default"); a project's tokens (dubctl token) see and act on its
tasks only. --daily-shared-minutes bounds the minutes of video a day (UTC)
its tasks take through the shared engines: past it, their steps wait with
reason project_quota until the next day (parked, never failed).`,
	}
	cmd.AddCommand(rm.projectCreateCmd(), rm.projectListCmd())
	return cmd
}

func (rm room) projectCreateCmd() *cobra.Command {
	var asJSON, noShared bool
	var n tenant.NewProject
	var minutes int
	cmd := &cobra.Command{
		Use:   "create ID [--name NAME] [--daily-shared-minutes N] [--no-shared-engines] [--fair-scope project|task] [--json]",
		Short: "Create a project (an admin's action)",
		Args:  cli.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n.ID = args[0]
			if cmd.Flags().Changed("daily-shared-minutes") {
				n.DailySharedMinutes = &minutes
			}
			if noShared {
				f := false
				n.SharedEngines = &f
			}
			return rm.open(cmd, func(ctx context.Context, t Backend) error {
				p, err := t.CreateProject(ctx, n)
				if err != nil {
					return err
				}
				if asJSON {
					return cli.WriteJSON(cmd.OutOrStdout(), p)
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "project %s created\n", p.ID)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&n.Name, "name", "", "a name to show (default: the id)")
	cmd.Flags().IntVar(&minutes, "daily-shared-minutes", 0, "minutes of video a day on the shared engines (default: no limit)")
	cmd.Flags().BoolVar(&noShared, "no-shared-engines", false, "its tasks may not use the shared engines")
	cmd.Flags().StringVar(&n.FairScope, "fair-scope", "", "project (its tasks share each step's window; the default) or task")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the project as JSON")
	return cmd
}

func (rm room) projectListCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list [--json]",
		Short: "List the projects (a project's token sees its own)",
		Args:  cli.ExactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return rm.open(cmd, func(ctx context.Context, t Backend) error {
				list, err := t.Projects(ctx)
				if err != nil {
					return err
				}
				return printProjects(cmd.OutOrStdout(), list, asJSON)
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	return cmd
}

func printProjects(w io.Writer, list []tenant.Project, asJSON bool) error {
	if asJSON {
		return cli.WriteJSON(w, list)
	}
	t := cli.NewTable(w, "ID", "NAME", "SHARED ENGINES", "DAILY SHARED MINUTES", "FAIR SCOPE", "CREATED")
	for _, p := range list {
		limit := "-"
		if p.DailySharedMinutes != nil {
			limit = strconv.Itoa(*p.DailySharedMinutes)
		}
		t.Row(p.ID, p.Name, strconv.FormatBool(p.SharedEngines), limit, p.FairScope, p.CreatedAt.UTC().Format(time.RFC3339))
	}
	return t.Flush()
}
