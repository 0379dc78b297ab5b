package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/cardboxhq/cardbox/cmd/internal/cli"
	"github.com/cardboxhq/cardbox/cmd/internal/config"
	"github.com/cardboxhq/cardbox/internal/backup"
)

func backupCommand() *cli.Command {
	return &cli.Command{
		Name: "backup", Args: "DEST", Settings: dbSettings,
		Purpose: "Back up the store, beside a running server or of a stopped one, into directory DEST: the database in one snapshot and the files up to the ends it committed; a later backup into DEST copies only what changed.",
		Env:     map[string]string{"rate": "CARDBOX_BACKUP_RATE"},
		Rules:   map[string]config.Rule{"rate": config.NonNegative},
		Setup: func(fs *flag.FlagSet) cli.Action {
			rate := fs.Int64("rate", backup.DefaultRate, "most bytes a second the backup writes, of the data directory's files and of the database's dump together (0: no limit)")
			return func(ctx context.Context, inv *cli.Invocation) error {
				r := *rate
				if r == 0 {
					r = -1
				}
				return runBackup(ctx, inv, r)
			}
		},
	}
}

func runBackup(ctx context.Context, inv *cli.Invocation, rate int64) error {
	cfg := inv.Config
	progress := cli.NewProgress(inv.Stderr)
	m, err := backup.Backup(ctx, backup.Options{
		DataDir: cfg.DataDir, Dest: inv.Args[0], DatabaseURL: cfg.DatabaseURL, PGBinDir: cfg.PGBinDir,
		Rate: rate, Progress: showStatus(progress),
	})
	progress.Done("")
	if err != nil {
		return err
	}
	var files int64
	for _, f := range m.Files {
		files += f.Size
	}
	fmt.Fprintf(inv.Stdout, "backed up store %s (%d turns) to %s in %s: turn log to %d, blob pack to %d (%d bytes of files, %d of them copied now), database dump %d bytes\n",
		m.StoreID, m.Turns, inv.Args[0], m.Took, m.Committed.TurnLog, m.Committed.Pack, files, m.Copied, m.Database.Dump.Size)
	return nil
}

func restoreCommand() *cli.Command {
	return &cli.Command{
		Name: "restore", Args: "SRC DATA_DIR", Settings: []string{"database-url", "pg-bindir"},
		Purpose: "Check every file of the backup in SRC against its manifest, then build a new data directory DATA_DIR from it (with a new embedded Postgres, or into the empty database --database-url names).",
		Setup: func(fs *flag.FlagSet) cli.Action {
			return func(ctx context.Context, inv *cli.Invocation) error { return runRestore(ctx, inv) }
		},
	}
}

func runRestore(ctx context.Context, inv *cli.Invocation) error {
	cfg := inv.Config
	progress := cli.NewProgress(inv.Stderr)
	m, err := backup.Restore(ctx, backup.RestoreOptions{
		Src: inv.Args[0], DataDir: inv.Args[1], DatabaseURL: cfg.DatabaseURL, PGBinDir: cfg.PGBinDir,
		Progress: showStatus(progress),
	})
	progress.Done("")
	if err != nil {
		return err
	}
	fmt.Fprintf(inv.Stdout, "restored store %s (backed up %s) into %s; check it with `cardbox verify --data-dir %s`, then start cardboxd on it\n",
		m.StoreID, m.Created.Format("2006-01-02 15:04:05Z"), inv.Args[1], inv.Args[1])
	return nil
}

// showStatus shows a backup's or a restore's status on the progress line.
func showStatus(p *cli.Progress) func(backup.Status) {
	return func(s backup.Status) {
		if s.Total > 0 {
			p.Show("%s: %d of %d MiB", s.Phase, s.Done>>20, s.Total>>20)
			return
		}
		p.Show("%s", s.Phase)
	}
}
