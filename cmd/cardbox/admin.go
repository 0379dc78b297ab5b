package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/cardboxhq/cardbox/cmd/internal/cli"
	"github.com/cardboxhq/cardbox/cmd/internal/config"
	"github.com/cardboxhq/cardbox/cmd/internal/database"
	"github.com/cardboxhq/cardbox/internal/datadir"
	"github.com/cardboxhq/cardbox/internal/pgerr"
	"github.com/cardboxhq/cardbox/internal/tenancy"
)

// dbSettings are the settings of a command that opens the server's
// database.
var dbSettings = []string{"data-dir", "database-url", "pg-bindir"}

// boundedDBSettings are dbSettings and --pg-timeout, which bounds each
// Postgres call of the command (withKeys).
var boundedDBSettings = append(slices.Clone(dbSettings), "pg-timeout")

// admin is what an administration command works with: the
// administration of the server's tenants, the operator as the audit log
// names them, and where its output and warnings go.
type admin struct {
	admin     *tenancy.Admin
	actor     string
	out, errs io.Writer
}

// withKeys opens the database the server uses (beside a running server,
// or on its own) and runs fn on it.
func withKeys(ctx context.Context, inv *cli.Invocation, fn func(admin) error) error {
	db, release, err := openAdminDB(ctx, inv.Config, inv.Path)
	if err != nil {
		return err
	}
	defer release()
	adm := tenancy.New(db.Pool, nil)
	timeout := inv.Config.PGTimeout // 0 unless the command takes --pg-timeout
	if timeout > 0 {
		adm.Bound(timeout)
	}
	err = fn(admin{admin: adm, actor: actor(), out: inv.Stdout, errs: inv.Stderr})
	if timeout > 0 && pgerr.Unavailable(err) {
		return fmt.Errorf("%w\nPostgres did not answer within --pg-timeout %v: run the command again once it answers "+
			"(a tenant deletion cut short then removes what it left)", err, timeout)
	}
	return err
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

// serverRuns reports whether a process, a running server, owns the data
// directory dir; it creates nothing there.
func serverRuns(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, datadir.LockFile)); err != nil {
		return false
	}
	lock, err := datadir.Acquire(dir, "cardbox (looking for a server)")
	if err != nil {
		return errors.Is(err, datadir.ErrLocked)
	}
	lock.Unlock()
	return false
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

// given reports whether the command line set fs's flag name.
func given(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// orDash is t, or "-" when there is none.
func orDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// table is a tab-aligned table on w.
func table(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
}

// printJSON writes v as JSON on w.
func printJSON(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}
