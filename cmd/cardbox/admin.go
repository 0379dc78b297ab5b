package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cardboxhq/cardbox/cmd/internal/config"
	"github.com/cardboxhq/cardbox/cmd/internal/database"
	"github.com/cardboxhq/cardbox/internal/auth"
	"github.com/cardboxhq/cardbox/internal/datadir"
	"github.com/cardboxhq/cardbox/internal/quota"
	"github.com/cardboxhq/cardbox/internal/ratelimit"
)

// adminCommand is a tenant or key administration command: its flags, how
// many arguments it takes, and what it does with the keys.
type adminCommand struct {
	flags func(fs *flag.FlagSet)
	args  int
	usage string // its arguments and flags, after the command's name
	run   func(ctx context.Context, k *auth.Keys, actor string, args []string) error
}

// runAdmin parses an administration command, opens the database the
// server uses (beside a running server, or on its own) and runs it.
func runAdmin(ctx context.Context, name string, cmd adminCommand, args []string) error {
	cfg, rest, err := config.ParseCommand(name, args, os.Stderr, cmd.flags)
	if err != nil {
		return err
	}
	if len(rest) != cmd.args {
		return fmt.Errorf("usage: %s", strings.TrimSpace(name+" "+cmd.usage))
	}
	db, release, err := openAdminDB(ctx, cfg, name)
	if err != nil {
		return err
	}
	defer release()
	return cmd.run(ctx, auth.NewKeys(db.Pool, nil), actor(), rest)
}

// openAdminDB opens the configured database as its owner (analysts' SQL
// roles are made by it; everything else still runs as the path roles).
// With the embedded cluster it joins a running server's, or takes the data
// directory's lock and starts the cluster for the command's duration.
func openAdminDB(ctx context.Context, cfg *config.Config, who string) (*database.DB, func(), error) {
	if cfg.DatabaseURL != "" {
		db, err := database.Open(ctx, cfg, database.Options{Owner: true})
		return db, func() { db.Close(context.Background()) }, err
	}
	lock, err := datadir.Acquire(cfg.DataDir, who)
	if errors.Is(err, datadir.ErrLocked) {
		db, err := database.Open(ctx, cfg, database.Options{Guest: true, Owner: true})
		if err != nil {
			return nil, nil, err
		}
		return db, func() { db.Close(context.Background()) }, nil
	}
	if err != nil {
		return nil, nil, err
	}
	db, err := database.Open(ctx, cfg, database.Options{Owner: true})
	if err != nil {
		lock.Unlock()
		return nil, nil, err
	}
	return db, func() { db.Close(context.Background()); lock.Unlock() }, nil
}

// actor names the operator in the audit log: the CLI and the OS user.
func actor() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	return "cli:" + name + "@" + host
}

var tenantCommands = map[string]adminCommand{
	"create": tenantCreate(),
	"delete": tenantDelete(os.Stdout),
	"rate":   tenantRate(),
	"quota":  tenantQuota(),
	"list":   {usage: "", run: tenantList},
}

// tenantList prints every tenant with its live keys and storage quota
// ("default": the server's --tenant-quota-bytes). What a tenant stores in
// all is known to the server only (GET /admin/tenants); the list shows its
// cards' and boxes' part, which Postgres counts.
func tenantList(ctx context.Context, k *auth.Keys, _ string, _ []string) error {
	tenants, err := k.ListTenants(ctx)
	if err != nil {
		return err
	}
	quotas, err := k.TenantQuotas(ctx)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TENANT\tNAME\tLIVE KEYS\tQUOTA BYTES\tCARDBOX BYTES\tCREATED")
	for _, t := range tenants {
		q := quotas[t.ID]
		limit := "default"
		if q.Bytes > 0 {
			limit = strconv.FormatInt(q.Bytes, 10)
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%d\t%s\n", t.ID, t.Name, t.LiveKeys, limit, q.CardBoxBytes, t.CreatedAt.UTC().Format(time.RFC3339))
	}
	return w.Flush()
}

func tenantQuota() adminCommand {
	var bytes int64
	return adminCommand{
		flags: func(fs *flag.FlagSet) {
			fs.Int64Var(&bytes, "bytes", -1, "bytes the tenant may store; 0: back to the server's --tenant-quota-bytes")
		},
		args: 1, usage: "NAME --bytes N",
		run: func(ctx context.Context, k *auth.Keys, actor string, args []string) error {
			if bytes < 0 {
				return errors.New("--bytes: want the bytes the tenant may store, or 0 for the server's default")
			}
			if err := k.SetQuota(ctx, actor, args[0], bytes); err != nil {
				return err
			}
			fmt.Printf("tenant %s: storage quota %d bytes (0: the server's default); servers apply it within %v\n", args[0], bytes, quota.RefreshEvery)
			return nil
		},
	}
}

func tenantCreate() adminCommand {
	var name string
	var sqlRole bool
	return adminCommand{
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&name, "name", "", "display name of the tenant")
			fs.BoolVar(&sqlRole, "sql-role", false, "also create a Postgres role for the tenant's analysts and print its password (see cardbox sql-role)")
		},
		args: 1, usage: "NAME [--name DISPLAY] [--sql-role]",
		run: func(ctx context.Context, k *auth.Keys, actor string, args []string) error {
			if !sqlRole {
				t, err := k.CreateTenant(ctx, actor, args[0], name)
				if err != nil {
					return err
				}
				fmt.Printf("created tenant %s\n", t.ID)
				return nil
			}
			t, r, password, err := k.CreateTenantWithSQLRole(ctx, actor, args[0], name)
			if err != nil {
				return err
			}
			fmt.Printf("created tenant %s\n", t.ID)
			printSQLRole(r, password)
			return nil
		},
	}
}

// errNotConfirmed is tenant delete without --yes: it says what would go
// and deletes nothing.
var errNotConfirmed = errors.New("nothing was deleted: run again with --yes to delete the tenant")

// tenantDelete deletes a tenant with --yes, printing what went to w;
// without --yes it prints what would go and fails.
func tenantDelete(w io.Writer) adminCommand {
	var yes bool
	return adminCommand{
		flags: func(fs *flag.FlagSet) {
			fs.BoolVar(&yes, "yes", false, "delete: without it, print what would be deleted and exit 1")
		},
		args: 1, usage: "NAME --yes",
		run: func(ctx context.Context, k *auth.Keys, actor string, args []string) error {
			if !yes {
				d, err := k.TenantRows(ctx, args[0])
				if err != nil {
					return err
				}
				printDeletion(w, "would delete", d)
				return errNotConfirmed
			}
			d, err := k.DeleteTenant(ctx, actor, args[0])
			if err != nil {
				return err
			}
			printDeletion(w, "deleted", d)
			for _, r := range d.Unremoved {
				fmt.Fprintf(w, "could not drop the Postgres role %s (it reads nothing now): DROP ROLE %s as a superuser\n", r, r)
			}
			fmt.Fprintln(w, "its keys no longer work; running servers forget it at once. Its turn records and blobs stay in the data\n"+
				"directory's files, unreadable, until a compaction rewrites them (docs/security.md, Deleting a tenant)")
			return nil
		},
	}
}

// printDeletion prints the rows of each table a deletion removed (or
// would remove).
func printDeletion(w io.Writer, what string, d auth.Deletion) {
	fmt.Fprintf(w, "%s tenant %s (rows: %d)\n", what, d.TenantID, d.Total())
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, t := range d.Tables {
		fmt.Fprintf(tw, "  %s\t%d\n", t.Table, t.Rows)
	}
	tw.Flush()
}

func tenantRate() adminCommand {
	var perSec float64
	var burst int
	return adminCommand{
		flags: func(fs *flag.FlagSet) {
			fs.Float64Var(&perSec, "rate", 0, "requests per second on each surface; 0 with --burst 0: back to the server's --tenant-rate")
			fs.IntVar(&burst, "burst", 0, "requests at once above the rate")
		},
		args: 1, usage: "NAME --rate N --burst M",
		run: func(ctx context.Context, k *auth.Keys, actor string, args []string) error {
			if err := k.SetRate(ctx, actor, args[0], auth.Rate{PerSec: perSec, Burst: burst}); err != nil {
				return err
			}
			fmt.Printf("tenant %s: rate %g/s, burst %d (0: the server's default); servers apply it within %v\n", args[0], perSec, burst, ratelimit.RefreshEvery)
			return nil
		},
	}
}

var keyCommands = map[string]adminCommand{
	"create": keyCreate(),
	"list":   keyList(),
	"revoke": {usage: "KEY_ID", args: 1, run: func(ctx context.Context, k *auth.Keys, actor string, args []string) error {
		key, err := k.RevokeKey(ctx, actor, args[0])
		if err != nil {
			return err
		}
		fmt.Printf("revoked %s of tenant %s; its sessions are being closed\n", key.ID, key.TenantID)
		return nil
	}},
}

func keyCreate() adminCommand {
	var tenant, project, role, expires string
	return adminCommand{
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&tenant, "tenant", "", "tenant the key belongs to")
			fs.StringVar(&project, "project", "", "the same as --tenant: a tenant is a CardBox project")
			fs.StringVar(&role, "role", "", "admin, writer, reader or analyst")
			fs.StringVar(&expires, "expires", "", "when the key stops working: a duration from now (720h) or an RFC 3339 time; empty: never")
		},
		usage: "--tenant NAME --role ROLE [--project ID] [--expires 720h]",
		run: func(ctx context.Context, k *auth.Keys, actor string, _ []string) error {
			t, err := tenantFlag(tenant, project)
			if err != nil {
				return err
			}
			r, err := auth.ParseRole(role)
			if err != nil {
				return err
			}
			at, err := parseExpiry(expires, time.Now())
			if err != nil {
				return err
			}
			key, secret, err := k.CreateKey(ctx, actor, t, r, at)
			if err != nil {
				return err
			}
			fmt.Printf("created key %s (tenant %s, role %s)\n", key.ID, key.TenantID, key.Role)
			fmt.Println("the secret follows; it is shown only this once:")
			fmt.Println(secret)
			return nil
		},
	}
}

// tenantFlag reconciles --tenant and --project, which name the same thing.
func tenantFlag(tenant, project string) (string, error) {
	switch {
	case tenant == "" && project == "":
		return "", errors.New("--tenant is required")
	case tenant != "" && project != "" && tenant != project:
		return "", fmt.Errorf("--tenant %q and --project %q differ; a key belongs to one tenant, which is its project", tenant, project)
	case tenant == "":
		return project, nil
	}
	return tenant, nil
}

// parseExpiry reads --expires: empty (never), a duration from now, or a
// time.
func parseExpiry(s string, now time.Time) (*time.Time, error) {
	if s == "" {
		return nil, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		at := now.Add(d)
		return &at, nil
	}
	at, err := time.Parse(time.RFC3339, s)
	if err != nil || !at.After(now) {
		return nil, fmt.Errorf("--expires %q: want a positive duration (720h) or a future RFC 3339 time", s)
	}
	return &at, nil
}

func keyList() adminCommand {
	var tenant string
	var asJSON bool
	return adminCommand{
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&tenant, "tenant", "", "only this tenant's keys")
			fs.BoolVar(&asJSON, "json", false, "print JSON")
		},
		usage: "[--tenant NAME] [--json]",
		run: func(ctx context.Context, k *auth.Keys, _ string, _ []string) error {
			keys, err := k.ListKeys(ctx, tenant)
			if err != nil || asJSON {
				if err == nil {
					err = json.NewEncoder(os.Stdout).Encode(keys)
				}
				return err
			}
			w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "KEY\tTENANT\tROLE\tCREATED\tEXPIRES\tREVOKED")
			for _, key := range keys {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", key.ID, key.TenantID, key.Role,
					key.CreatedAt.UTC().Format(time.RFC3339), orDash(key.ExpiresAt), orDash(key.RevokedAt))
			}
			return w.Flush()
		},
	}
}

func orDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

var sqlRoleCommands = map[string]adminCommand{
	"create": sqlRoleCreate(),
	"list":   sqlRoleList(),
	"drop":   sqlRoleDrop(),
}

func sqlRoleCreate() adminCommand {
	var tenant, role string
	return adminCommand{
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&tenant, "tenant", "", "tenant whose rows the role reads")
			fs.StringVar(&role, "role", "", "role name (default: cardbox_sql_ and the tenant)")
		},
		usage: "--tenant NAME [--role ROLE]",
		run: func(ctx context.Context, k *auth.Keys, actor string, _ []string) error {
			if tenant == "" {
				return errors.New("--tenant is required")
			}
			r, password, err := k.CreateSQLRole(ctx, actor, tenant, role)
			if err != nil {
				return err
			}
			printSQLRole(r, password)
			return nil
		},
	}
}

// printSQLRole reports a created or rotated SQL role, its password alone
// on the last line of standard output.
func printSQLRole(r auth.SQLRole, password string) {
	if r.RotatedAt != nil {
		fmt.Printf("new password for SQL role %s (tenant %s); the old one no longer logs in\n", r.Name, r.TenantID)
	} else {
		fmt.Printf("created SQL role %s (tenant %s), connection limit %d\n", r.Name, r.TenantID, auth.SQLRoleConnLimit)
	}
	warnUnended(r)
	fmt.Println("the password follows; it is shown only this once:")
	fmt.Println(password)
}

// warnUnended says on standard error that sessions of r outlive it.
func warnUnended(r auth.SQLRole) {
	switch {
	case r.Unended < 0:
		fmt.Fprintf(os.Stderr, "warning: could not end the open sessions of %s (not a superuser?); they go on until they disconnect\n", r.Name)
	case r.Unended > 0:
		fmt.Fprintf(os.Stderr, "warning: %d sessions of %s did not end within 5 s\n", r.Unended, r.Name)
	}
}

func sqlRoleList() adminCommand {
	var tenant string
	var asJSON bool
	return adminCommand{
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&tenant, "tenant", "", "only this tenant's roles")
			fs.BoolVar(&asJSON, "json", false, "print JSON")
		},
		usage: "[--tenant NAME] [--json]",
		run: func(ctx context.Context, k *auth.Keys, _ string, _ []string) error {
			roles, err := k.ListSQLRoles(ctx, tenant)
			if err != nil || asJSON {
				if err == nil {
					err = json.NewEncoder(os.Stdout).Encode(roles)
				}
				return err
			}
			w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ROLE\tTENANT\tCREATED\tROTATED\tSTATE")
			for _, r := range roles {
				state := "ok"
				if r.Missing {
					state = "missing (dropped outside cardbox)"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", r.Name, r.TenantID, r.CreatedAt.UTC().Format(time.RFC3339), orDash(r.RotatedAt), state)
			}
			return w.Flush()
		},
	}
}

func sqlRoleDrop() adminCommand {
	var tenant, role string
	return adminCommand{
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&tenant, "tenant", "", "drop every SQL role of this tenant")
			fs.StringVar(&role, "role", "", "drop this SQL role")
		},
		usage: "--tenant NAME | --role ROLE",
		run: func(ctx context.Context, k *auth.Keys, actor string, _ []string) error {
			dropped, err := k.DropSQLRoles(ctx, actor, tenant, role)
			if err != nil {
				return err
			}
			for _, r := range dropped {
				fmt.Printf("dropped SQL role %s (tenant %s)\n", r.Name, r.TenantID)
				warnUnended(r)
			}
			return nil
		},
	}
}

// adminGroup runs "cardbox tenant ...", "cardbox key ..." or "cardbox sql-role ...".
func adminGroup(ctx context.Context, group string, cmds map[string]adminCommand, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: cardbox %s %s", group, subcommands(cmds))
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		return fmt.Errorf("cardbox %s: unknown command %q (%s)", group, args[0], subcommands(cmds))
	}
	return runAdmin(ctx, "cardbox "+group+" "+args[0], cmd, args[1:])
}

func subcommands(cmds map[string]adminCommand) string {
	return strings.Join(slices.Sorted(maps.Keys(cmds)), "|")
}
