package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/cardboxhq/cardbox/cmd/internal/cli"
	"github.com/cardboxhq/cardbox/cmd/internal/config"
	"github.com/cardboxhq/cardbox/internal/quota"
	"github.com/cardboxhq/cardbox/internal/ratelimit"
	"github.com/cardboxhq/cardbox/internal/tenancy"
)

// tenantCommand is `cardbox tenant`.
func tenantCommand() *cli.Command {
	return &cli.Command{
		Name:    "tenant",
		Purpose: "Administer tenants (hosted mode), beside a running server or not.",
		Subs:    []*cli.Command{tenantCreate(), tenantList(), tenantRate(), tenantQuota(), tenantRetention(), tenantDelete()},
	}
}

func tenantCreate() *cli.Command {
	return &cli.Command{
		Name: "create", Args: "NAME", Settings: boundedDBSettings,
		Purpose: "Create a tenant; with --sql-role also a Postgres role for its analysts, printing its password once.",
		Setup: func(fs *flag.FlagSet) cli.Action {
			name := fs.String("name", "", "display name of the tenant")
			sqlRole := fs.Bool("sql-role", false, "also create a Postgres role for the tenant's analysts and print its password (see cardbox sql-role)")
			return func(ctx context.Context, inv *cli.Invocation) error {
				return withKeys(ctx, inv, func(a admin) error {
					return createTenant(ctx, a, inv.Args[0], *name, *sqlRole)
				})
			}
		},
	}
}

func createTenant(ctx context.Context, a admin, id, name string, sqlRole bool) error {
	if !sqlRole {
		t, err := a.admin.CreateTenant(ctx, a.actor, id, name)
		if err != nil {
			return err
		}
		fmt.Fprintf(a.out, "created tenant %s\n", t.ID)
		return nil
	}
	t, r, password, err := a.admin.CreateTenantWithSQLRole(ctx, a.actor, id, name)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.out, "created tenant %s\n", t.ID)
	printSQLRole(a, r, password)
	return nil
}

func tenantList() *cli.Command {
	return &cli.Command{
		Name: "list", Settings: boundedDBSettings,
		Purpose: "List the tenants with their live keys, storage quotas and retention policies.",
		Setup: func(fs *flag.FlagSet) cli.Action {
			return func(ctx context.Context, inv *cli.Invocation) error {
				return withKeys(ctx, inv, func(a admin) error { return listTenants(ctx, a) })
			}
		},
	}
}

// listTenants prints every tenant with its live keys and storage quota
// ("default": the server's --tenant-quota-bytes). What a tenant stores in
// all is known to the server only (GET /admin/tenants); the list shows its
// cards' and boxes' part, which Postgres counts.
func listTenants(ctx context.Context, a admin) error {
	tenants, err := a.admin.ListTenants(ctx)
	if err != nil {
		return err
	}
	quotas, err := a.admin.TenantQuotas(ctx)
	if err != nil {
		return err
	}
	policies, err := a.admin.Retentions(ctx, "")
	if err != nil {
		return err
	}
	retention := map[string][]tenancy.Retention{}
	for _, p := range policies {
		retention[p.TenantID] = append(retention[p.TenantID], p)
	}
	w := table(a.out)
	fmt.Fprintln(w, "TENANT\tNAME\tLIVE KEYS\tQUOTA BYTES\tCARDBOX BYTES\tCREATED\tRETENTION")
	for _, t := range tenants {
		q := quotas[t.ID]
		limit := "default"
		if q.Bytes > 0 {
			limit = strconv.FormatInt(q.Bytes, 10)
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%d\t%s\t%s\n", t.ID, t.Name, t.LiveKeys, limit, q.CardBoxBytes,
			t.CreatedAt.UTC().Format(time.RFC3339), retentionSummary(retention[t.ID]))
	}
	return w.Flush()
}

func tenantQuota() *cli.Command {
	return &cli.Command{
		Name: "quota", Args: "NAME", Settings: boundedDBSettings,
		Purpose: "Set the bytes a tenant may store; beyond them its writes are refused (507 QUOTA_EXCEEDED).",
		Setup: func(fs *flag.FlagSet) cli.Action {
			bytes := fs.Int64("bytes", 0, "bytes the tenant may store (required); 0: back to the server's --tenant-quota-bytes")
			return func(ctx context.Context, inv *cli.Invocation) error {
				if !given(fs, "bytes") {
					return inv.Usagef("missing --bytes: the bytes the tenant may store, or 0 for the server's default")
				}
				if err := config.Check(fs, "bytes", "", config.NonNegative); err != nil {
					return inv.Usagef("%v", err)
				}
				return withKeys(ctx, inv, func(a admin) error {
					if err := a.admin.SetQuota(ctx, a.actor, inv.Args[0], *bytes); err != nil {
						return err
					}
					fmt.Fprintf(a.out, "tenant %s: storage quota %d bytes (0: the server's default); servers apply it within %v\n", inv.Args[0], *bytes, quota.RefreshEvery)
					return nil
				})
			}
		},
	}
}

func tenantRate() *cli.Command {
	return &cli.Command{
		Name: "rate", Args: "NAME", Settings: boundedDBSettings,
		Purpose: "Set the requests per second a tenant may make on each surface, and its burst.",
		Rules:   map[string]config.Rule{"rate": config.NonNegative, "burst": config.NonNegative},
		Setup: func(fs *flag.FlagSet) cli.Action {
			perSec := fs.Float64("rate", 0, "requests per second on each surface; 0 with --burst 0: back to the server's --tenant-rate")
			burst := fs.Int("burst", 0, "requests at once above the rate")
			return func(ctx context.Context, inv *cli.Invocation) error {
				if (*perSec == 0) != (*burst == 0) {
					return inv.Usagef("--rate %g --burst %d: give both above 0, or both 0 for the server's default", *perSec, *burst)
				}
				return withKeys(ctx, inv, func(a admin) error {
					if err := a.admin.SetRate(ctx, a.actor, inv.Args[0], tenancy.Rate{PerSec: *perSec, Burst: *burst}); err != nil {
						return err
					}
					fmt.Fprintf(a.out, "tenant %s: rate %g/s, burst %d (0: the server's default); servers apply it within %v\n", inv.Args[0], *perSec, *burst, ratelimit.RefreshEvery)
					return nil
				})
			}
		},
	}
}

// errNotConfirmed is tenant delete without --yes: it says what would go
// and deletes nothing.
var errNotConfirmed = errors.New("nothing was deleted: run again with --yes to delete the tenant")

func tenantDelete() *cli.Command {
	return &cli.Command{
		Name: "delete", Args: "NAME", Settings: boundedDBSettings,
		Purpose: "Delete a tenant and every row it owns; without --yes only print what would be deleted (and exit 1).",
		Setup: func(fs *flag.FlagSet) cli.Action {
			yes := fs.Bool("yes", false, "delete: without it, print what would be deleted and exit 1")
			return func(ctx context.Context, inv *cli.Invocation) error {
				return withKeys(ctx, inv, func(a admin) error { return deleteTenant(ctx, a, inv.Args[0], *yes) })
			}
		},
	}
}

// deleteTenant deletes a tenant with yes, printing what went; without it
// prints what would go and fails.
func deleteTenant(ctx context.Context, a admin, id string, yes bool) error {
	if !yes {
		d, err := a.admin.TenantRows(ctx, id)
		if err != nil {
			return err
		}
		printDeletion(a.out, "would delete", d)
		return errNotConfirmed
	}
	d, err := a.admin.DeleteTenant(ctx, a.actor, id)
	if err != nil {
		return err
	}
	printDeletion(a.out, "deleted", d)
	for _, r := range d.Unremoved {
		fmt.Fprintf(a.out, "could not drop the Postgres role %s (it reads nothing now): DROP ROLE %s as a superuser\n", r, r)
	}
	fmt.Fprintln(a.out, "its keys no longer work; running servers forget it at once. Its turn records and blobs stay in the data\n"+
		"directory's files, unreadable, until a compaction rewrites them (docs/security.md, Deleting a tenant)")
	return nil
}

// printDeletion prints the rows of each table a deletion removed (or
// would remove).
func printDeletion(w io.Writer, what string, d tenancy.Deletion) {
	fmt.Fprintf(w, "%s tenant %s (rows: %d)\n", what, d.TenantID, d.Total())
	tw := table(w)
	for _, t := range d.Tables {
		fmt.Fprintf(tw, "  %s\t%d\n", t.Table, t.Rows)
	}
	tw.Flush()
}
