package datadir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDatabaseRecordRoundTrips(t *testing.T) {
	for _, d := range []Database{
		{Embedded: true},
		{Host: "db.example.com", Port: 5432, Name: "cardbox"},
		{Host: "/var/run/postgresql", Port: 5433, Name: "cardbox prod"},
	} {
		dir := t.TempDir()
		if _, ok, err := ReadDatabase(dir); ok || err != nil {
			t.Fatalf("nothing recorded yet: ok %v, err %v", ok, err)
		}
		if err := WriteDatabase(dir, d); err != nil {
			t.Fatal(err)
		}
		got, ok, err := ReadDatabase(dir)
		if err != nil || !ok || got != d {
			t.Errorf("recorded %+v, read %+v (ok %v, err %v)", d, got, ok, err)
		}
	}
}

// The record never holds a user or a password: WriteDatabase has none
// to write, and what it writes is the kind, host, port and database.
func TestDatabaseRecordHoldsNoCredentials(t *testing.T) {
	dir := t.TempDir()
	if err := WriteDatabase(dir, Database{Host: "db", Port: 5432, Name: "cardbox"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, DatabaseFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, _, _ := strings.Cut(line, ":")
		if key != "kind" && key != "host" && key != "port" && key != "database" {
			t.Errorf("record line %q", line)
		}
	}
}

func TestCheckDatabase(t *testing.T) {
	external := Database{Host: "db.example.com", Port: 5432, Name: "cardbox"}
	elsewhere := Database{Host: "other.example.com", Port: 5432, Name: "cardbox"}
	embedded := Database{Embedded: true}
	const store = "0190a7b2-0000-7000-8000-000000000001"
	for _, tc := range []struct {
		name     string
		recorded *Database
		storeID  string
		cluster  bool // the directory holds an embedded cluster
		target   Database
		confirm  bool
		refused  bool
	}{
		{name: "a new directory, embedded", target: embedded},
		{name: "a new directory, at a URL", target: external},
		{name: "recorded at a URL, started without one", recorded: &external, storeID: store, target: embedded, refused: true},
		{name: "recorded at a URL, the same URL", recorded: &external, storeID: store, target: external},
		{name: "recorded at a URL, another URL", recorded: &external, storeID: store, target: elsewhere, confirm: true},
		{name: "recorded embedded, embedded", recorded: &embedded, storeID: store, cluster: true, target: embedded},
		{name: "recorded embedded, a URL", recorded: &embedded, storeID: store, cluster: true, target: external, confirm: true},
		{name: "unrecorded store without a cluster, embedded", storeID: store, target: embedded, refused: true},
		{name: "unrecorded store with a cluster, embedded", storeID: store, cluster: true, target: embedded},
		{name: "unrecorded store, a URL", storeID: store, cluster: true, target: external, confirm: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.recorded != nil {
				if err := WriteDatabase(dir, *tc.recorded); err != nil {
					t.Fatal(err)
				}
			}
			if tc.cluster {
				if err := os.MkdirAll(filepath.Join(dir, "postgres", "pgdata"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "postgres", "pgdata", "PG_VERSION"), []byte("15\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			confirm, err := CheckDatabase(dir, tc.storeID, tc.target)
			if refused := errors.Is(err, ErrOtherDatabase); refused != tc.refused || (err != nil && !refused) {
				t.Fatalf("err = %v, want refused %v", err, tc.refused)
			}
			if confirm != tc.confirm {
				t.Errorf("confirm = %v, want %v", confirm, tc.confirm)
			}
			if err == nil {
				return
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") || !strings.Contains(msg, dir) || !strings.Contains(msg, "--database-url") {
				t.Errorf("message %q: want one line naming the directory and the missing --database-url", msg)
			}
			if tc.recorded != nil && !strings.Contains(msg, "cardbox at db.example.com:5432") {
				t.Errorf("message %q does not name the recorded database", msg)
			}
		})
	}
}

func TestConfirmNamesBothDatabases(t *testing.T) {
	dir := t.TempDir()
	recorded := Database{Host: "db.example.com", Port: 5432, Name: "cardbox"}
	target := Database{Host: "other.example.com", Port: 6432, Name: "cardbox2"}
	if err := WriteDatabase(dir, recorded); err != nil {
		t.Fatal(err)
	}
	const mine, theirs = "0190a7b2-0000-7000-8000-000000000001", "0190a7b2-0000-7000-8000-000000000002"
	if err := Confirm(dir, mine, target, []string{theirs, mine}); err != nil {
		t.Fatalf("a database holding the store: %v", err)
	}
	for _, held := range [][]string{nil, {theirs}} {
		err := Confirm(dir, mine, target, held)
		if !errors.Is(err, ErrOtherDatabase) {
			t.Fatalf("held %v: %v, want ErrOtherDatabase", held, err)
		}
		msg := err.Error()
		for _, want := range []string{dir, mine, "cardbox at db.example.com:5432", "cardbox2 at other.example.com:6432"} {
			if !strings.Contains(msg, want) {
				t.Errorf("held %v: message %q does not name %q", held, msg, want)
			}
		}
		if len(held) > 0 && !strings.Contains(msg, theirs) {
			t.Errorf("message %q does not name the store the database holds", msg)
		}
		if strings.Contains(msg, "\n") {
			t.Errorf("message %q is more than one line", msg)
		}
	}
}
