package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/cardboxhq/cardbox/cmd/internal/cli"
	"github.com/cardboxhq/cardbox/internal/tenancy"
)

// sqlRoleCommand is `cardbox sql-role`.
func sqlRoleCommand() *cli.Command {
	return &cli.Command{
		Name:    "sql-role",
		Purpose: "Administer analysts' Postgres roles: each reads one tenant's rows only, over --sql-addr.",
		Subs:    []*cli.Command{sqlRoleCreate(), sqlRoleList(), sqlRoleDrop()},
	}
}

func sqlRoleCreate() *cli.Command {
	return &cli.Command{
		Name: "create", Settings: boundedDBSettings,
		Purpose: "Create a tenant's analyst role (or give an existing one a new password) and print its password once.",
		Setup: func(fs *flag.FlagSet) cli.Action {
			tenant := fs.String("tenant", "", "tenant whose rows the role reads (required)")
			role := fs.String("role", "", "role name (default: cardbox_sql_ and the tenant)")
			return func(ctx context.Context, inv *cli.Invocation) error {
				if *tenant == "" {
					return inv.Usagef("missing --tenant")
				}
				return withKeys(ctx, inv, func(a admin) error {
					r, password, err := a.admin.CreateSQLRole(ctx, a.actor, *tenant, *role)
					if err != nil {
						return err
					}
					printSQLRole(a, r, password)
					return nil
				})
			}
		},
	}
}

// printSQLRole reports a created or rotated SQL role, its password alone
// on the last line of the output.
func printSQLRole(a admin, r tenancy.SQLRole, password string) {
	w := a.out
	if r.RotatedAt != nil {
		fmt.Fprintf(w, "new password for SQL role %s (tenant %s); the old one no longer logs in\n", r.Name, r.TenantID)
	} else {
		fmt.Fprintf(w, "created SQL role %s (tenant %s), connection limit %d\n", r.Name, r.TenantID, tenancy.SQLRoleConnLimit)
	}
	warnUnended(a.errs, r)
	fmt.Fprintln(w, "the password follows; it is shown only this once:")
	fmt.Fprintln(w, password)
}

// warnUnended says on w (standard error) that sessions of r outlive it.
func warnUnended(w io.Writer, r tenancy.SQLRole) {
	switch {
	case r.Unended < 0:
		fmt.Fprintf(w, "warning: could not end the open sessions of %s (not a superuser?); they go on until they disconnect\n", r.Name)
	case r.Unended > 0:
		fmt.Fprintf(w, "warning: %d sessions of %s did not end within 5 s\n", r.Unended, r.Name)
	}
}

func sqlRoleList() *cli.Command {
	return &cli.Command{
		Name: "list", Settings: boundedDBSettings,
		Purpose: "List the analysts' roles and whether each still exists in Postgres.",
		Setup: func(fs *flag.FlagSet) cli.Action {
			tenant := fs.String("tenant", "", "only this tenant's roles")
			asJSON := fs.Bool("json", false, "print JSON")
			return func(ctx context.Context, inv *cli.Invocation) error {
				return withKeys(ctx, inv, func(a admin) error { return listSQLRoles(ctx, a, *tenant, *asJSON) })
			}
		},
	}
}

func listSQLRoles(ctx context.Context, a admin, tenant string, asJSON bool) error {
	roles, err := a.admin.ListSQLRoles(ctx, tenant)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(a.out, roles)
	}
	w := table(a.out)
	fmt.Fprintln(w, "ROLE\tTENANT\tCREATED\tROTATED\tSTATE")
	for _, r := range roles {
		state := "ok"
		if r.Missing {
			state = "missing (dropped outside cardbox)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", r.Name, r.TenantID, r.CreatedAt.UTC().Format(time.RFC3339), orDash(r.RotatedAt), state)
	}
	return w.Flush()
}

func sqlRoleDrop() *cli.Command {
	return &cli.Command{
		Name: "drop", Settings: boundedDBSettings,
		Purpose: "Drop a tenant's analyst roles (--tenant) or one role (--role), ending their sessions.",
		Setup: func(fs *flag.FlagSet) cli.Action {
			tenant := fs.String("tenant", "", "drop every SQL role of this tenant")
			role := fs.String("role", "", "drop this SQL role")
			return func(ctx context.Context, inv *cli.Invocation) error {
				if *tenant == "" && *role == "" {
					return inv.Usagef("missing --tenant or --role")
				}
				return withKeys(ctx, inv, func(a admin) error {
					dropped, err := a.admin.DropSQLRoles(ctx, a.actor, *tenant, *role)
					if err != nil {
						return err
					}
					for _, r := range dropped {
						fmt.Fprintf(a.out, "dropped SQL role %s (tenant %s)\n", r.Name, r.TenantID)
						warnUnended(a.errs, r)
					}
					return nil
				})
			}
		},
	}
}
