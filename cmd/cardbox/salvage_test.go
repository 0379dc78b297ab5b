package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cardboxhq/cardbox/internal/datadir"
)

// Offline commands refuse a data directory a server owns, naming it, and
// touch nothing (they fail before connecting anywhere).
func TestOfflineCommandsRefuseALockedDataDirectory(t *testing.T) {
	dir := t.TempDir()
	lock, err := datadir.Acquire(dir, "cardboxd serving 127.0.0.1:9009")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	args := []string{"--data-dir", dir, "--database-url", "postgres://nobody@127.0.0.1:1/none"}
	for name, cmd := range map[string]func(context.Context, []string) error{
		"verify": verify, "recover": recoverStore, "migrate": migrate,
	} {
		err := cmd(context.Background(), args)
		if !errors.Is(err, datadir.ErrLocked) || !strings.Contains(err.Error(), "cardboxd serving 127.0.0.1:9009") {
			t.Errorf("%s beside a server: %v, want a refusal naming it", name, err)
		}
	}
}
