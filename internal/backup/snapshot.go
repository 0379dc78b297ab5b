package backup

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/cardboxhq/cardbox/store"
)

// snapshot is an open REPEATABLE READ transaction whose snapshot is
// exported: pg_dump imports it (--snapshot), so the dump holds exactly
// the rows the committed ends were read with. It stays open until the
// dump is done.
type snapshot struct {
	conn      *pgx.Conn
	tx        pgx.Tx
	id        string // pg_export_snapshot()
	storeID   string
	ends      Ends
	sealed    []store.SealedSegment
	turns     int64
	owner     string
	migration int64
	server    string
}

// openSnapshot begins the transaction, exports its snapshot and reads,
// in it, the store, its committed ends and its sealed segments.
func openSnapshot(ctx context.Context, url string) (*snapshot, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	s := &snapshot{conn: conn}
	if err := s.read(ctx); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *snapshot) read(ctx context.Context) error {
	tx, err := s.conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("begin the snapshot: %w", err)
	}
	s.tx = tx
	// The first statement takes the snapshot; everything below reads it.
	if err := tx.QueryRow(ctx, `SELECT pg_export_snapshot()`).Scan(&s.id); err != nil {
		return fmt.Errorf("export the snapshot: %w", err)
	}
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass('turn_stores') IS NOT NULL`).Scan(&exists); err != nil {
		return fmt.Errorf("look for the turn store: %w", err)
	}
	if !exists {
		return fmt.Errorf("the database holds no cardbox store (no turn_stores table)")
	}
	committed, err := store.ReadCommitted(ctx, tx)
	if err != nil {
		return fmt.Errorf("read the committed ends: %w", err)
	}
	s.storeID = committed.StoreID.String()
	if s.sealed, err = store.ReadSealed(ctx, tx, committed.StoreID); err != nil {
		return err
	}
	s.ends = Ends{TurnLog: committed.TurnLog, Pack: committed.Pack, NextTurnID: committed.NextTurnID}
	if s.ends.Pack < 0 {
		if s.ends.TurnLog > 0 {
			return fmt.Errorf("the blob pack's committed end is not recorded yet: start cardboxd once on this store (it records it), then back up")
		}
		s.ends.Pack = 0 // nothing committed yet
	}
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM turns`).Scan(&s.turns); err != nil {
		return fmt.Errorf("count the turns: %w", err)
	}
	err = tx.QueryRow(ctx, `SELECT (SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = 'turn_stores'::regclass),
	        coalesce((SELECT max(version_id) FROM goose_db_version WHERE is_applied), 0),
	        current_setting('server_version')`).Scan(&s.owner, &s.migration, &s.server)
	if err != nil {
		return fmt.Errorf("read the database's versions: %w", err)
	}
	return nil
}

// close ends the transaction and the connection.
func (s *snapshot) close() {
	ctx := context.Background()
	if s.tx != nil {
		_ = s.tx.Rollback(ctx)
	}
	_ = s.conn.Close(ctx)
}

// runTool runs a PostgreSQL client program and returns its error with
// what it printed.
func runTool(ctx context.Context, bin string, args ...string) error {
	cmd := exec.CommandContext(ctx, bin, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		name := bin[strings.LastIndexByte(bin, '/')+1:]
		return fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// toolVersion is what bin --version prints.
func toolVersion(ctx context.Context, bin string) string {
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// toolError is the error of a program's Output with what it printed on
// its standard error, which says why.
func toolError(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
	}
	return err
}
