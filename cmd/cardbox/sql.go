package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"

	"github.com/cardboxhq/cardbox/cmd/internal/config"
	"github.com/cardboxhq/cardbox/cmd/internal/database"
	"github.com/cardboxhq/cardbox/internal/auth"
)

// sqlShell is `cardbox sql --tenant NAME [--print]`: psql as the tenant's
// analyst role over the embedded cluster's loopback listener, so analysts
// never hold the service's credentials. psql asks for the role's password
// (`cardbox sql-role create` printed it); --print only prints the
// connection string.
func sqlShell(ctx context.Context, args []string) error {
	var tenant, role string
	var printOnly bool
	cfg, rest, err := config.ParseCommand("cardbox sql", args, os.Stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&tenant, "tenant", "", "the tenant whose analyst role to use (required)")
		fs.StringVar(&role, "role", "", "which of the tenant's SQL roles, when it has several")
		fs.BoolVar(&printOnly, "print", false, "print the connection string instead of running psql")
	})
	if err != nil {
		return err
	}
	if tenant == "" || len(rest) > 0 {
		return errors.New("usage: cardbox sql --tenant NAME [--role ROLE] [--print]")
	}
	if cfg.SQLAddr == "" || cfg.DatabaseURL != "" {
		return errors.New("cardbox sql connects to the embedded Postgres's analyst listener: set --sql-addr " +
			"(CARDBOX_SQL_ADDR) as the server has it, see docs/security.md (SQL access for analysts)")
	}
	name, err := analystRole(ctx, cfg, tenant, role)
	if err != nil {
		return err
	}
	host, port, err := net.SplitHostPort(cfg.SQLAddr)
	if err != nil {
		return fmt.Errorf("--sql-addr %q: %w", cfg.SQLAddr, err)
	}
	conn := fmt.Sprintf("host=%s port=%s dbname=%s user=%s sslmode=disable", host, port, database.EmbeddedDB, name)
	if printOnly {
		fmt.Println(conn)
		return nil
	}
	psql, err := exec.LookPath("psql")
	if err != nil {
		return fmt.Errorf("psql not found (apt-get install -y postgresql-client); connect with: %s", conn)
	}
	return syscall.Exec(psql, []string{"psql", conn}, os.Environ())
}

// analystRole returns the name of tenant's SQL role (role, if given, must
// be one of them).
func analystRole(ctx context.Context, cfg *config.Config, tenant, role string) (string, error) {
	db, release, err := openAdminDB(ctx, cfg, "cardbox sql")
	if err != nil {
		return "", err
	}
	defer release()
	roles, err := auth.NewKeys(db.Pool, nil).ListSQLRoles(ctx, tenant)
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
