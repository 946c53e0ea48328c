package admin

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/tenant"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// tokenCmd is `dubctl token create|list|revoke`.
func (rm room) tokenCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Create, list and revoke a project's API tokens",
		Long: `token manages a project's tokens: admin (the project's tasks, dead letters
and tokens), operator (its tasks and dead letters) or read. The secret is
printed once, when the token is made; only its SHA-256 is kept. A revoked
token is refused by every console replica from its next request on.`,
	}
	cmd.AddCommand(rm.tokenCreateCmd(), rm.tokenListCmd(), rm.tokenRevokeCmd())
	return cmd
}

func (rm room) tokenCreateCmd() *cobra.Command {
	var asJSON bool
	var n tenant.NewToken
	var expires string
	cmd := &cobra.Command{
		Use:   "create --project ID --name NAME --role admin|operator|read [--expires 30d] [--json]",
		Short: "Make a token of a project and print its secret, once",
		Args:  cli.ExactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if expires != "" {
				d, err := parseLifetime(expires)
				if err != nil {
					return cli.UsageError(err)
				}
				at := time.Now().Add(d).UTC().Truncate(time.Second)
				n.ExpiresAt = &at
			}
			return rm.open(cmd, func(ctx context.Context, t Backend) error {
				c, err := t.CreateToken(ctx, n)
				if err != nil {
					return err
				}
				if asJSON {
					return cli.WriteJSON(cmd.OutOrStdout(), c)
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "token %s (%s/%s, %s): %s\nKeep it: it is not shown again.\n",
					c.ID, c.Project, c.Name, c.Role, c.Secret)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&n.Project, "project", "", "the project (required)")
	cmd.Flags().StringVar(&n.Name, "name", "", "the token's name (required)")
	cmd.Flags().StringVar(&n.Role, "role", "", "admin, operator or read (required)")
	cmd.Flags().StringVar(&expires, "expires", "", "lifetime: 90d, 12h, … at most 366d (default: never)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the token and its secret as JSON")
	for _, f := range []string{"project", "name", "role"} {
		_ = cmd.MarkFlagRequired(f)
	}
	return cmd
}

func (rm room) tokenListCmd() *cobra.Command {
	var asJSON bool
	var project string
	cmd := &cobra.Command{
		Use:   "list --project ID [--json]",
		Short: "List a project's tokens, live and revoked, without their secrets",
		Args:  cli.ExactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return rm.open(cmd, func(ctx context.Context, t Backend) error {
				list, err := t.Tokens(ctx, project)
				if err != nil {
					return err
				}
				return printTokens(cmd.OutOrStdout(), list, asJSON)
			})
		},
	}
	cmd.Flags().StringVar(&project, "project", "", "the project (required)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	_ = cmd.MarkFlagRequired("project")
	return cmd
}

func (rm room) tokenRevokeCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "revoke TOKEN_ID [--json]",
		Short: "Revoke a token: refused everywhere from its next request on",
		Args:  cli.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := uuid.Parse(args[0])
			if err != nil {
				return cli.UsageError(fmt.Errorf("token id %q: want a UUID (dubctl token list)", args[0]))
			}
			return rm.open(cmd, func(ctx context.Context, t Backend) error {
				tok, err := t.RevokeToken(ctx, id)
				if err != nil {
					return err
				}
				if asJSON {
					return cli.WriteJSON(cmd.OutOrStdout(), tok)
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "token %s (%s/%s) revoked\n", tok.ID, tok.Project, tok.Name)
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the token as JSON")
	return cmd
}

// parseLifetime reads 90d, 36h, 45m (a Go duration, or whole days).
func parseLifetime(v string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 1 {
			return 0, fmt.Errorf("--expires %q: want a whole number of days (90d) or a duration (36h)", v)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("--expires %q: want a whole number of days (90d) or a duration (36h)", v)
	}
	return d, nil
}

func printTokens(w io.Writer, list []tenant.Token, asJSON bool) error {
	if asJSON {
		return cli.WriteJSON(w, list)
	}
	t := cli.NewTable(w, "ID", "PROJECT", "NAME", "ROLE", "EXPIRES", "REVOKED")
	stamp := func(at *time.Time) string {
		if at == nil {
			return "-"
		}
		return at.UTC().Format(time.RFC3339)
	}
	for _, k := range list {
		t.Row(k.ID.String(), k.Project, k.Name, k.Role, stamp(k.ExpiresAt), stamp(k.RevokedAt))
	}
	return t.Flush()
}
