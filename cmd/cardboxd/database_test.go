package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cardboxhq/cardbox/internal/datadir"
	"github.com/cardboxhq/cardbox/internal/pgtest"
)

// A data directory whose store lives at a URL records it; a start
// without the URL (which would make an embedded cluster) or with another
// database's refuses in one line naming both, and touches nothing; the
// same database at another address (a proxy) is the same store.
func TestServerRefusesAnotherDatabase(t *testing.T) {
	dataDir := embeddedDataDir(t)
	url := pgtest.NewDB(t)
	srv := startServer(t, dataDir, url)
	appendOne(t, srv, "in the URL's database")
	if err := srv.stop(); err != nil {
		t.Fatalf("server: %v\n%s", err, srv.log)
	}
	rec, ok, err := datadir.ReadDatabase(dataDir)
	if err != nil || !ok || rec.Embedded || rec.Name != pgtest.DBName(url) {
		t.Fatalf("recorded %+v (ok %v, err %v), want the URL's database %s", rec, ok, err, pgtest.DBName(url))
	}

	other := pgtest.NewDB(t)
	for _, tc := range []struct {
		name, url string
		want      []string
	}{
		{"no URL", "", []string{"store lives in the Postgres database " + pgtest.DBName(url), "without --database-url",
			"would start an embedded Postgres"}},
		{"another database", other, []string{"belongs to turn store", "in the Postgres database " + pgtest.DBName(url),
			"points at the Postgres database " + pgtest.DBName(other), "which holds no turn store"}},
	} {
		out, err := runToExit(t, "CARDBOX_DATA_DIR="+dataDir, "CARDBOX_DATABASE_URL="+tc.url,
			"CARDBOX_BINARY_ADDR="+freePort(t), "CARDBOX_HTTP_ADDR="+freePort(t))
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() == 0 {
			t.Fatalf("%s: %v, want a non-zero exit\n%s", tc.name, err, out)
		}
		// The log's record of the error, and the error's one line.
		_, msg, _ := strings.Cut(out, "\ncardboxd: wrong database for the data directory: ")
		msg, _, _ = strings.Cut(msg, "\n")
		for _, want := range tc.want {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: the error line does not say %q:\n%s", tc.name, want, out)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dataDir, "postgres")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an embedded cluster was made beside the URL's store (stat: %v)", err)
	}
	var migrated bool
	if err := pgtest.SuperuserPool(t, pgtest.DBName(other)).QueryRow(t.Context(),
		"SELECT EXISTS (SELECT FROM turn_stores)").Scan(&migrated); err != nil || migrated {
		t.Errorf("the other database got a turn store (%v, %v)", migrated, err)
	}

	_, proxied := pgtest.NewProxy(t, url)
	again := startServer(t, dataDir, proxied)
	appendOne(t, again, "through another address of the same database")
	if err := again.stop(); err != nil {
		t.Fatalf("server through the proxy: %v\n%s", err, again.log)
	}
}
