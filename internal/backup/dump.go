package backup

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cardboxhq/cardbox/internal/pgembed"
)

// dumpDatabase runs pg_dump in the exported snapshot into the backup's
// db/ directory and returns the dump and pg_dump's version. Rows are read
// with row-level security on: the tables' owner sees every row through
// its owner_rows policy without needing BYPASSRLS, and a superuser
// bypasses it anyway.
func dumpDatabase(ctx context.Context, binDir, url, snapshotID, dest string) (Blob, string, error) {
	bin, err := pgembed.Tool(binDir, "pg_dump")
	if err != nil {
		return Blob{}, "", err
	}
	name := filepath.Join(dbDir, time.Now().UTC().Format("20060102T150405.000000000Z")+".dump")
	b, err := writeBlob(dest, name, func(tmp string) error {
		// Compression level 1: the dump competes with the server for CPU.
		return runTool(ctx, bin, "--snapshot="+snapshotID, "--enable-row-security", "--format=custom",
			"--compress=1", "--file="+tmp, "--dbname="+url)
	})
	if err != nil {
		return Blob{}, "", fmt.Errorf("dump the database: %w", err)
	}
	return b, toolVersion(ctx, bin), nil
}

// dumpRoles saves the embedded cluster's roles (cardbox's own, and the
// analysts' with their password hashes), which live outside any
// database, for a restore into a new cluster.
func dumpRoles(ctx context.Context, binDir, url, dest string) (Blob, error) {
	bin, err := pgembed.Tool(binDir, "pg_dumpall")
	if err != nil {
		return Blob{}, err
	}
	name := filepath.Join(dbDir, time.Now().UTC().Format("20060102T150405.000000000Z")+".roles.sql")
	b, err := writeBlob(dest, name, func(tmp string) error {
		return runTool(ctx, bin, "--roles-only", "--file="+tmp, "--dbname="+url)
	})
	if err != nil {
		return Blob{}, fmt.Errorf("dump the roles: %w", err)
	}
	return b, nil
}

// writeBlob has write fill a temporary file, fsyncs and hashes it, and
// renames it to name inside dest.
func writeBlob(dest, name string, write func(tmp string) error) (Blob, error) {
	path := filepath.Join(dest, name)
	tmp := path + tmpSuffix
	defer os.Remove(tmp)
	if err := write(tmp); err != nil {
		return Blob{}, err
	}
	if err := syncPath(tmp); err != nil {
		return Blob{}, err
	}
	size, sum, err := hashFile(tmp)
	if err != nil {
		return Blob{}, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return Blob{}, err
	}
	return Blob{Name: name, Size: size, BLAKE3: sum}, nil
}

func syncPath(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
