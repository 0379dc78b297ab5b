package pgembed

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// binaries are the PostgreSQL programs the cluster needs.
type binaries struct {
	initdb, pgCtl, postgres string
}

// findBinaries looks in override, then pg_config --bindir, then PATH, then
// the usual install locations (Debian's /usr/lib/postgresql/N/bin, newest
// first).
func findBinaries(override string) (*binaries, error) {
	for _, dir := range candidateDirs(override) {
		if b, ok := binariesIn(dir); ok {
			return b, nil
		}
	}
	return nil, ErrNotInstalled
}

func candidateDirs(override string) []string {
	if override != "" {
		return []string{override}
	}
	var dirs []string
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dirs = append(dirs, strings.TrimSpace(string(out)))
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		dirs = append(dirs, filepath.Dir(p))
	}
	dirs = append(dirs, debianDirs()...)
	return append(dirs, "/usr/local/pgsql/bin", "/opt/homebrew/bin", "/usr/local/bin", "/usr/bin")
}

// debianDirs lists /usr/lib/postgresql/*/bin, newest major version first.
func debianDirs() []string {
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	major := func(p string) int {
		n, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		return n
	}
	sort.Slice(matches, func(i, j int) bool { return major(matches[i]) > major(matches[j]) })
	return matches
}

func binariesIn(dir string) (*binaries, bool) {
	b := &binaries{
		initdb:   filepath.Join(dir, "initdb"),
		pgCtl:    filepath.Join(dir, "pg_ctl"),
		postgres: filepath.Join(dir, "postgres"),
	}
	for _, p := range []string{b.initdb, b.pgCtl, b.postgres} {
		if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return nil, false
		}
	}
	return b, true
}
