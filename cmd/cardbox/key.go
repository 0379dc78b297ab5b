package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/cardboxhq/cardbox/cmd/internal/cli"
	"github.com/cardboxhq/cardbox/internal/auth"
	"github.com/cardboxhq/cardbox/internal/tenancy"
)

// keyCommand is `cardbox key`.
func keyCommand() *cli.Command {
	return &cli.Command{
		Name:    "key",
		Purpose: "Administer API keys (hosted mode): a tenant's keys and operator keys.",
		Subs:    []*cli.Command{keyCreate(), keyList(), keyRevoke()},
	}
}

// keyRequest is what `cardbox key create` was asked for.
type keyRequest struct {
	operator bool
	tenant   string
	role     auth.Role
	expires  *time.Time
}

func keyCreate() *cli.Command {
	return &cli.Command{
		Name: "create", Settings: dbSettings,
		Purpose: "Create a tenant's key (--tenant, --role) or an operator key (--operator) and print its secret once.",
		Setup: func(fs *flag.FlagSet) cli.Action {
			operator := fs.Bool("operator", false, "an operator key: administers the service (tenants, every tenant's keys, quotas, rates, usage, /metrics), reads and writes no tenant's data; not with --tenant or --role")
			tenant := fs.String("tenant", "", "tenant the key belongs to")
			project := fs.String("project", "", "the same as --tenant: a tenant is a CardBox project")
			role := fs.String("role", "", "admin, writer, reader or analyst")
			expires := fs.String("expires", "", "when the key stops working: a duration from now (720h) or an RFC 3339 time; empty: never")
			return func(ctx context.Context, inv *cli.Invocation) error {
				req, err := parseKeyRequest(*operator, *tenant, *project, *role, *expires, time.Now())
				if err != nil {
					return inv.Usagef("%v", err)
				}
				return withKeys(ctx, inv, func(a admin) error { return createKey(ctx, a, req) })
			}
		},
	}
}

// parseKeyRequest checks the flags of `cardbox key create` together.
func parseKeyRequest(operator bool, tenant, project, role, expires string, now time.Time) (keyRequest, error) {
	at, err := parseExpiry(expires, now)
	if err != nil {
		return keyRequest{}, err
	}
	if operator {
		if tenant != "" || project != "" || role != "" {
			return keyRequest{}, errors.New("--operator takes no --tenant, --project or --role: an operator key belongs to no tenant")
		}
		return keyRequest{operator: true, role: auth.RoleOperator, expires: at}, nil
	}
	t, err := tenantFlag(tenant, project)
	if err != nil {
		return keyRequest{}, err
	}
	if role == "" {
		return keyRequest{}, errors.New("missing --role (admin, writer, reader or analyst)")
	}
	r, err := auth.ParseRole(role)
	if err != nil || r == auth.RoleOperator {
		return keyRequest{}, fmt.Errorf("--role %q: want admin, writer, reader or analyst (an operator key: --operator)", role)
	}
	return keyRequest{tenant: t, role: r, expires: at}, nil
}

func createKey(ctx context.Context, a admin, req keyRequest) error {
	var key tenancy.Key
	var secret string
	var err error
	if req.operator {
		key, secret, err = a.admin.CreateOperatorKey(ctx, a.actor, req.expires)
	} else {
		key, secret, err = a.admin.CreateKey(ctx, a.actor, req.tenant, req.role, req.expires)
	}
	if err != nil {
		return err
	}
	if req.operator {
		fmt.Fprintf(a.out, "created operator key %s\n", key.ID)
	} else {
		fmt.Fprintf(a.out, "created key %s (tenant %s, role %s)\n", key.ID, key.TenantID, key.Role)
	}
	fmt.Fprintln(a.out, "the secret follows; it is shown only this once:")
	fmt.Fprintln(a.out, secret)
	return nil
}

// tenantFlag reconciles --tenant and --project, which name the same thing.
func tenantFlag(tenant, project string) (string, error) {
	switch {
	case tenant == "" && project == "":
		return "", errors.New("missing --tenant (or --operator for an operator key)")
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

func keyList() *cli.Command {
	return &cli.Command{
		Name: "list", Settings: dbSettings,
		Purpose: "List API keys, operator keys (tenant -) included; never their secrets.",
		Setup: func(fs *flag.FlagSet) cli.Action {
			tenant := fs.String("tenant", "", "only this tenant's keys")
			asJSON := fs.Bool("json", false, "print JSON")
			return func(ctx context.Context, inv *cli.Invocation) error {
				return withKeys(ctx, inv, func(a admin) error { return listKeys(ctx, a, *tenant, *asJSON) })
			}
		},
	}
}

func listKeys(ctx context.Context, a admin, tenant string, asJSON bool) error {
	keys, err := a.admin.ListKeys(ctx, tenant)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(a.out, keys)
	}
	w := table(a.out)
	fmt.Fprintln(w, "KEY\tTENANT\tROLE\tCREATED\tEXPIRES\tREVOKED")
	for _, key := range keys {
		owner := key.TenantID
		if owner == "" {
			owner = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", key.ID, owner, key.Role,
			key.CreatedAt.UTC().Format(time.RFC3339), orDash(key.ExpiresAt), orDash(key.RevokedAt))
	}
	return w.Flush()
}

func keyRevoke() *cli.Command {
	return &cli.Command{
		Name: "revoke", Args: "KEY_ID", Settings: dbSettings,
		Purpose: "Revoke a key: refused from the next request on, its open sessions closed.",
		Setup: func(fs *flag.FlagSet) cli.Action {
			return func(ctx context.Context, inv *cli.Invocation) error {
				return withKeys(ctx, inv, func(a admin) error {
					key, err := a.admin.RevokeKey(ctx, a.actor, inv.Args[0])
					if err != nil {
						return err
					}
					owner := "tenant " + key.TenantID
					if key.TenantID == "" {
						owner = "the operator"
					}
					fmt.Fprintf(a.out, "revoked %s of %s; its sessions are being closed\n", key.ID, owner)
					return nil
				})
			}
		},
	}
}
