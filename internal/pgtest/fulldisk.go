package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cardboxhq/cardbox/internal/testkit"
)

// SmallDisk moves tables of database db (a NewDB database's name) into a
// tablespace on a file system of their own, a tmpfs of size bytes, and
// returns its directory: a test that fills it (FillDisk) makes Postgres
// answer what it answers when its disk is full, SQLSTATE 53100 ("could not
// extend file ...: No space left on device"), for writes to those tables.
// When the test ends the tables move back and the tablespace and the tmpfs
// go.
//
// It needs root (to mount) and a test server on this machine (the tmpfs
// must be where postgres writes); otherwise the test is skipped, loudly,
// or fails when CI is set.
func SmallDisk(t testing.TB, db string, size int64, tables ...string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, SuperuserURL(db))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	var dataDir string
	if err := conn.QueryRow(ctx, "SHOW data_directory").Scan(&dataDir); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dataDir)
	if err != nil {
		testkit.SkipOrFail(t, "full-disk test: the test server's data directory is not on this machine: %v", err)
	}
	owner := fi.Sys().(*syscall.Stat_t)
	// postgres runs as another user than the test: the directory's
	// parents must let it through (t.TempDir's are private).
	dir, err := os.MkdirTemp("", "cardbox-smalldisk-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	opts := fmt.Sprintf("size=%d,mode=0700,uid=%d,gid=%d", size, owner.Uid, owner.Gid)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", opts, "tmpfs", dir).CombinedOutput(); err != nil {
		testkit.SkipOrFail(t, "full-disk test: cannot mount a tmpfs (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	space := pgx.Identifier{fmt.Sprintf("cardbox_small_%d_%d", os.Getpid(), seq.Add(1))}.Sanitize()
	if _, err := conn.Exec(ctx, "CREATE TABLESPACE "+space+" LOCATION '"+dir+"'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		for _, table := range tables {
			if _, err := conn.Exec(ctx, "ALTER TABLE "+pgx.Identifier{table}.Sanitize()+" SET TABLESPACE pg_default"); err != nil {
				t.Errorf("move %s back: %v", table, err)
			}
		}
		if _, err := conn.Exec(ctx, "DROP TABLESPACE "+space); err != nil {
			t.Errorf("drop tablespace: %v", err)
		}
	})
	for _, table := range tables {
		if _, err := conn.Exec(ctx, "ALTER TABLE "+pgx.Identifier{table}.Sanitize()+" SET TABLESPACE "+space); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// FillDisk writes a file in dir until its file system is full and returns
// a function that removes it. The file is removed when the test ends.
func FillDisk(t testing.TB, dir string) (free func()) {
	t.Helper()
	path := filepath.Join(dir, "filler")
	free = func() {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("free the disk: %v", err)
		}
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(free)
	defer f.Close()
	buf := make([]byte, 64<<10)
	for len(buf) > 0 {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			buf = buf[:len(buf)/2] // the last few blocks
		}
	}
	return free
}
