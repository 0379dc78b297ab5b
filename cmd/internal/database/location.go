package database

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/cmd/internal/config"
	"github.com/cardboxhq/cardbox/internal/datadir"
	"github.com/cardboxhq/cardbox/store"
)

// A data directory's turn store lives in one database (internal/datadir's
// DatabaseFile records which). Open checks it before it starts anything:
// a command or server configured for another database refuses, naming
// both, rather than start an embedded cluster beside a store that lives
// at a URL, or use a URL whose database does not hold the store.

// location is where cfg points: the embedded cluster, or the URL's host,
// port and database (its first host when it names several).
func location(cfg *config.Config) (datadir.Database, error) {
	if cfg.DatabaseURL == "" {
		return datadir.Database{Embedded: true}, nil
	}
	pc, err := pgconn.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return datadir.Database{}, fmt.Errorf("CARDBOX_DATABASE_URL: %w", err)
	}
	return datadir.Database{Host: pc.Host, Port: pc.Port, Name: pc.Database}, nil
}

// dataDirCheck is what checkDataDir found: the store's id and whether the
// database must be seen to hold it.
type dataDirCheck struct {
	dir, storeID string
	target       datadir.Database
	confirm      bool
}

// checkDataDir checks cfg against the database cfg.DataDir's store is
// recorded in (nothing to check without a data directory).
func checkDataDir(cfg *config.Config) (dataDirCheck, error) {
	target, err := location(cfg)
	if err != nil {
		return dataDirCheck{}, err
	}
	c := dataDirCheck{dir: cfg.DataDir, target: target}
	if cfg.DataDir == "" {
		return c, nil
	}
	id, err := store.ReadStoreID(cfg.DataDir)
	if err != nil {
		return c, fmt.Errorf("data directory %s: %w", cfg.DataDir, err)
	}
	if id != [16]byte{} {
		c.storeID = id.String()
	}
	c.confirm, err = datadir.CheckDatabase(cfg.DataDir, c.storeID, target)
	return c, err
}

// confirmStore checks, when checkDataDir asked for it, that the database
// behind owner (the URL's role, which owns turn_stores) holds the data
// directory's store.
func (c dataDirCheck) confirmStore(ctx context.Context, owner *pgxpool.Pool) error {
	if !c.confirm {
		return nil
	}
	var exists bool
	if err := owner.QueryRow(ctx, `SELECT to_regclass('turn_stores') IS NOT NULL`).Scan(&exists); err != nil {
		return fmt.Errorf("look for the data directory's turn store: %w", err)
	}
	var held []string
	if exists {
		rows, err := owner.Query(ctx, `SELECT store_id::text FROM turn_stores ORDER BY created_at`)
		if err != nil {
			return fmt.Errorf("look for the data directory's turn store: %w", err)
		}
		if held, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return fmt.Errorf("look for the data directory's turn store: %w", err)
		}
	}
	return datadir.Confirm(c.dir, c.storeID, c.target, held)
}

// RecordDatabase records in dataDir that its turn store lives in d's
// database, unless it says so already: cardboxd calls it once its store
// is open (the store has checked that the directory and the database
// belong together).
func (d *DB) RecordDatabase(dataDir string) error {
	rec, ok, err := datadir.ReadDatabase(dataDir)
	if err == nil && ok && rec == d.location {
		return nil
	}
	return datadir.WriteDatabase(dataDir, d.location)
}
