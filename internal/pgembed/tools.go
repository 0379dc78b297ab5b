package pgembed

import (
	"fmt"
	"os"
	"path/filepath"
)

// Tool returns the path of a PostgreSQL client program (pg_dump,
// pg_restore, psql) from the installation the embedded cluster would use:
// binDir when set, else the directory where initdb, pg_ctl and postgres
// are found. A tool of the same installation as the server reads and
// writes what the server does (pg_dump refuses a server newer than
// itself).
func Tool(binDir, name string) (string, error) {
	bins, err := findBinaries(binDir)
	if err != nil {
		return "", err
	}
	path := filepath.Join(filepath.Dir(bins.initdb), name)
	if fi, err := os.Stat(path); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%s not found beside %s: install the PostgreSQL client programs of the same version, or point CARDBOX_PG_BINDIR at their directory", name, bins.initdb)
	}
	return path, nil
}
