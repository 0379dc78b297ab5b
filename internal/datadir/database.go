package datadir

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cardboxhq/cardbox/store/syncfile"
)

// DatabaseFile records, inside the data directory, which database its
// turn store lives in: the directory's files and that database's rows are
// one store (its STORE_ID names the turn_stores row), and no other
// database can serve them. cardboxd writes it once its store is open;
// every command checks it before it starts an embedded cluster or uses a
// database (CheckDatabase).
const DatabaseFile = "DATABASE"

// Database is where a store's database is: the embedded cluster in the
// data directory, or a server at a URL, named by host, port and database
// name (never a user or a password).
type Database struct {
	Embedded bool
	// Host is a host name, an IP address or a unix socket's directory.
	Host string
	Port uint16
	Name string
}

// String names the database for a message.
func (d Database) String() string {
	if d.Embedded {
		return "the embedded Postgres"
	}
	return fmt.Sprintf("the Postgres database %s at %s", d.Name, d.address())
}

func (d Database) address() string {
	if strings.HasPrefix(d.Host, "/") {
		return fmt.Sprintf("%s (socket, port %d)", d.Host, d.Port)
	}
	if strings.Contains(d.Host, ":") {
		return fmt.Sprintf("[%s]:%d", d.Host, d.Port)
	}
	return fmt.Sprintf("%s:%d", d.Host, d.Port)
}

// ReadDatabase returns the database dir's store is recorded in, and false
// when none is recorded.
func ReadDatabase(dir string) (Database, bool, error) {
	path := filepath.Join(dir, DatabaseFile)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return Database{}, false, nil
	}
	if err != nil {
		return Database{}, false, err
	}
	defer f.Close()
	var d Database
	var kind string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			return Database{}, false, fmt.Errorf("%s: a line is not key: value: %q", path, line)
		}
		value = strings.TrimSpace(value)
		switch strings.TrimSpace(key) {
		case "kind":
			kind = value
		case "host":
			d.Host = value
		case "port":
			p, err := strconv.ParseUint(value, 10, 16)
			if err != nil {
				return Database{}, false, fmt.Errorf("%s: port: %w", path, err)
			}
			d.Port = uint16(p)
		case "database":
			d.Name = value
		}
	}
	if err := sc.Err(); err != nil {
		return Database{}, false, fmt.Errorf("%s: %w", path, err)
	}
	switch kind {
	case "embedded":
		return Database{Embedded: true}, true, nil
	case "external":
		if d.Host == "" || d.Name == "" {
			return Database{}, false, fmt.Errorf("%s: an external database needs a host and a database", path)
		}
		return d, true, nil
	}
	return Database{}, false, fmt.Errorf("%s: kind is %q, want embedded or external", path, kind)
}

// WriteDatabase records d as the database of dir's store, durably (a
// temporary file renamed over the old one).
func WriteDatabase(dir string, d Database) error {
	var b strings.Builder
	b.WriteString("# The database this data directory's turn store lives in, recorded by cardboxd\n" +
		"# (never a user or a password). cardboxd and cardbox refuse to use this\n" +
		"# directory with another database; see docs/operations.md.\n")
	if d.Embedded {
		b.WriteString("kind: embedded\n")
	} else {
		fmt.Fprintf(&b, "kind: external\nhost: %s\nport: %d\ndatabase: %s\n", d.Host, d.Port, d.Name)
	}
	path := filepath.Join(dir, DatabaseFile)
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("record the database: %w", err)
	}
	if _, err := f.WriteString(b.String()); err != nil {
		f.Close()
		return fmt.Errorf("record the database: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("record the database: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("record the database: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("record the database: %w", err)
	}
	return syncfile.Dir(dir)
}

// ErrOtherDatabase is a command or server configured for another database
// than the one the data directory's store lives in.
var ErrOtherDatabase = errors.New("wrong database for the data directory")

// CheckDatabase decides, before anything is started or connected to,
// whether a process configured for target may use dir, whose turn store
// is storeID ("" when it has none yet): it refuses (ErrOtherDatabase)
// when target is the embedded cluster and the store lives in an external
// database (as recorded, or, in a directory from before the record, as
// its having a store and no cluster says). confirm says the database at
// target must hold storeID (see Confirm) before it is used: target is
// external and not the recorded one (the same database may have another
// address), or nothing is recorded.
func CheckDatabase(dir, storeID string, target Database) (confirm bool, err error) {
	rec, ok, err := ReadDatabase(dir)
	if err != nil {
		return false, err
	}
	if !ok && storeID == "" {
		return false, nil
	}
	if target.Embedded {
		switch {
		case ok && !rec.Embedded:
			return false, fmt.Errorf("%w: %s's store lives in %s (recorded in %s); without --database-url (CARDBOX_DATABASE_URL) "+
				"this would start an embedded Postgres in %s: give the server's database URL",
				ErrOtherDatabase, dir, rec, filepath.Join(dir, DatabaseFile), filepath.Join(dir, "postgres"))
		case !ok && !hasCluster(dir):
			return false, fmt.Errorf("%w: %s holds turn store %s and no embedded Postgres (%s), so its store lives in a database at a URL; "+
				"without --database-url (CARDBOX_DATABASE_URL) this would start an embedded Postgres there: give the server's database URL",
				ErrOtherDatabase, dir, storeID, filepath.Join(dir, "postgres"))
		}
		return false, nil
	}
	return storeID != "" && (!ok || rec != target), nil
}

// Confirm is the check CheckDatabase asked for: held are the turn stores
// the database at target holds (its turn_stores rows; none when it has no
// such table). It refuses, naming both databases, unless storeID is
// among them.
func Confirm(dir, storeID string, target Database, held []string) error {
	for _, id := range held {
		if id == storeID {
			return nil
		}
	}
	holds := "which holds no turn store"
	if len(held) > 0 {
		holds = "which holds turn store " + strings.Join(held, ", ")
	}
	belongs := "turn store " + storeID
	if rec, ok, err := ReadDatabase(dir); err == nil && ok {
		belongs += ", in " + rec.String() + " (recorded in " + filepath.Join(dir, DatabaseFile) + ")"
	}
	return fmt.Errorf("%w: %s belongs to %s; --database-url (CARDBOX_DATABASE_URL) points at %s, %s: "+
		"give the server's database URL, or another --data-dir", ErrOtherDatabase, dir, belongs, target, holds)
}

// hasCluster reports whether dir holds an embedded cluster (its
// PG_VERSION, which initdb writes).
func hasCluster(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "postgres", "pgdata", "PG_VERSION"))
	return err == nil
}
