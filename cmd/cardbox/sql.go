package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"syscall"

	"github.com/cardboxhq/cardbox/cmd/internal/cli"
	"github.com/cardboxhq/cardbox/cmd/internal/config"
	"github.com/cardboxhq/cardbox/cmd/internal/database"
	"github.com/cardboxhq/cardbox/internal/tenancy"
)

// sqlCommand is `cardbox sql`: psql as a tenant's analyst role over the
// embedded cluster's loopback listener, so analysts never hold the
// service's credentials. psql asks for the role's password (`cardbox
// sql-role create` printed it); --print only prints the connection
// string. run replaces the process with psql (execPsql), or, in tests,
// does what they need.
func sqlCommand(run func(argv []string) error) *cli.Command {
	return &cli.Command{
		Name: "sql", Pass: "PSQL_ARG", Settings: append(slices.Clone(dbSettings), "sql-addr"),
		Purpose: "Run psql as a tenant's analyst role on the server's SQL listener (found in the data directory of a running server, or --sql-addr); arguments after -- go to psql.",
		Setup: func(fs *flag.FlagSet) cli.Action {
			tenant := fs.String("tenant", "", "the tenant whose analyst role to use (required)")
			role := fs.String("role", "", "which of the tenant's SQL roles, when it has several")
			printOnly := fs.Bool("print", false, "print the connection string instead of running psql")
			return func(ctx context.Context, inv *cli.Invocation) error {
				if *tenant == "" {
					return inv.Usagef("missing --tenant")
				}
				if inv.Config.DatabaseURL != "" {
					return inv.Usagef("--database-url: cardbox sql connects to the embedded Postgres's analyst listener; " +
						"with an external Postgres, give analysts access on that server (see docs/security.md)")
				}
				conn, err := analystConn(ctx, inv.Config, *tenant, *role)
				if err != nil {
					return err
				}
				if *printOnly {
					fmt.Fprintln(inv.Stdout, conn)
					return nil
				}
				return run(psqlArgv(conn, inv.Passed))
			}
		},
	}
}

// psqlArgv is the command line of psql on conn, with the arguments
// given after "--" (-c 'SELECT 1', -f report.sql, ...).
func psqlArgv(conn string, passed []string) []string {
	return append([]string{"psql", "--dbname=" + conn}, passed...)
}

// execPsql replaces this process with psql.
func execPsql(argv []string) error {
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return fmt.Errorf("psql not found (apt-get install -y postgresql-client); connect with: %s", argv[1])
	}
	return syscall.Exec(path, argv, os.Environ())
}

// analystConn is the connection string of tenant's analyst role (role,
// if given, must be one of them) on the SQL listener: --sql-addr, or the
// one the running server's cluster listens on.
func analystConn(ctx context.Context, cfg *config.Config, tenant, role string) (string, error) {
	if cfg.SQLAddr == "" && !serverRuns(cfg.DataDir) {
		return "", fmt.Errorf("no SQL listener: no cardboxd runs on %s; start it with --sql-addr "+
			"(e.g. 127.0.0.1:5433, see docs/security.md, SQL access for analysts), or give its address with --sql-addr", cfg.DataDir)
	}
	db, release, err := openAdminDB(ctx, cfg, "cardbox sql")
	if err != nil {
		return "", err
	}
	defer release()
	name, err := analystRole(ctx, db, tenant, role)
	if err != nil {
		return "", err
	}
	addr := cfg.SQLAddr
	if addr == "" {
		addr = db.SQLAddr()
	}
	if addr == "" {
		return "", fmt.Errorf("no SQL listener: no cardboxd running on %s listens for analysts; start it with --sql-addr "+
			"(e.g. 127.0.0.1:5433, see docs/security.md, SQL access for analysts), or give its address with --sql-addr", cfg.DataDir)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("--sql-addr %q: %w", addr, err)
	}
	return fmt.Sprintf("host=%s port=%s dbname=%s user=%s sslmode=disable", host, port, database.EmbeddedDB, name), nil
}

// analystRole returns the name of tenant's SQL role (role, if given, must
// be one of them).
func analystRole(ctx context.Context, db *database.DB, tenant, role string) (string, error) {
	roles, err := tenancy.New(db.Pool, nil).ListSQLRoles(ctx, tenant)
	if err != nil {
		return "", err
	}
	var names []string
	for _, r := range roles {
		if !r.Missing && (role == "" || r.Name == role) {
			names = append(names, r.Name)
		}
	}
	switch {
	case len(names) == 0:
		return "", fmt.Errorf("tenant %q has no SQL role%s: cardbox sql-role create --tenant %s", tenant, orRole(role), tenant)
	case len(names) > 1:
		return "", fmt.Errorf("tenant %q has several SQL roles (%v): say which with --role", tenant, names)
	}
	return names[0], nil
}

func orRole(role string) string {
	if role == "" {
		return ""
	}
	return " named " + role
}
