package backup

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/internal/pgembed"
)

// dumpDatabase runs pg_dump in the exported snapshot into the backup's
// db/ directory, its output paced by limit, and returns the dump and
// pg_dump's version. Rows are read with row-level security on: the
// tables' owner sees every row through its owner_rows policy without
// needing BYPASSRLS, and a superuser bypasses it anyway.
func dumpDatabase(ctx context.Context, limit limiter, binDir, url, snapshotID, dest string) (Blob, string, error) {
	bin, err := pgembed.Tool(binDir, "pg_dump")
	if err != nil {
		return Blob{}, "", err
	}
	name := filepath.Join(dbDir, time.Now().UTC().Format("20060102T150405.000000000Z")+".dump")
	b, err := writeBlob(dest, name, func(w io.Writer) error {
		// Compression level 1: the dump competes with the server for CPU.
		// The archive goes to standard output, where the throttle reads
		// it: pg_dump waits while the throttle does, and so reads the
		// database no faster. (An archive written to a pipe has no data
		// offsets in its table of contents, which only a parallel or
		// reordered pg_restore needs; restore reads it in order.)
		return runPaced(ctx, limit, w, bin, "--snapshot="+snapshotID, "--enable-row-security", "--format=custom",
			"--compress=1", "--dbname="+url)
	})
	if err != nil {
		return Blob{}, "", fmt.Errorf("dump the database: %w", err)
	}
	return b, toolVersion(ctx, bin), nil
}

// dumpRoles saves the embedded cluster's roles (cardbox's own, and the
// analysts' with their password hashes), which live outside any
// database, for a restore into a new cluster.
func dumpRoles(ctx context.Context, limit limiter, binDir, url, dest string) (Blob, error) {
	bin, err := pgembed.Tool(binDir, "pg_dumpall")
	if err != nil {
		return Blob{}, err
	}
	name := filepath.Join(dbDir, time.Now().UTC().Format("20060102T150405.000000000Z")+".roles.sql")
	b, err := writeBlob(dest, name, func(w io.Writer) error {
		return runPaced(ctx, limit, w, bin, "--roles-only", "--dbname="+url)
	})
	if err != nil {
		return Blob{}, fmt.Errorf("dump the roles: %w", err)
	}
	return b, nil
}

// runPaced runs a PostgreSQL client program and copies its standard
// output to w no faster than limit allows. Its error says what the
// program printed on its standard error.
func runPaced(ctx context.Context, limit limiter, w io.Writer, bin string, args ...string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the program if the copy fails
	cmd := exec.CommandContext(ctx, bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	_, copyErr := io.Copy(w, &pacedReader{ctx: ctx, r: out, limit: limit})
	if copyErr != nil {
		cancel()
	}
	waitErr := cmd.Wait()
	name := filepath.Base(bin)
	switch {
	case copyErr != nil:
		return fmt.Errorf("%s: %w", name, copyErr)
	case waitErr != nil:
		return fmt.Errorf("%s: %w: %s", name, waitErr, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// pacedReader reads from r no faster than limit allows: each read takes
// at most the limiter's burst, and returns once the limiter grants what
// it read. The writer behind r (a program's pipe) waits meanwhile.
type pacedReader struct {
	ctx   context.Context
	r     io.Reader
	limit limiter
}

func (p *pacedReader) Read(b []byte) (int, error) {
	if burst := p.limit.Burst(); len(b) > burst {
		b = b[:burst]
	}
	n, err := p.r.Read(b)
	if n > 0 {
		// Waiting after the read, for what it returned, rather than
		// before it for len(b): reads of a pipe return what is there,
		// often much less than asked for.
		if werr := p.limit.WaitN(p.ctx, n); werr != nil {
			return 0, werr
		}
	}
	return n, err
}

// writeBlob has write fill a temporary file, hashing what it writes,
// fsyncs it, and renames it to name inside dest.
func writeBlob(dest, name string, write func(w io.Writer) error) (Blob, error) {
	path := filepath.Join(dest, name)
	tmp := path + tmpSuffix
	defer os.Remove(tmp) // after the rename: no such file
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return Blob{}, err
	}
	h := blake3.New()
	cw := &countingWriter{w: io.MultiWriter(f, h)}
	err = write(cw)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Blob{}, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return Blob{}, err
	}
	return Blob{Name: name, Size: cw.n, BLAKE3: hex.EncodeToString(h.Sum(nil))}, nil
}

// countingWriter counts what it passes on.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}
