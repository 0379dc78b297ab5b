package datadir

import (
	"errors"
	"strings"
	"testing"
)

func TestAcquireIsExclusiveAndNamesTheOwner(t *testing.T) {
	dir := t.TempDir()
	first, err := Acquire(dir, "cardboxd serving 127.0.0.1:9009")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { first.Unlock() })

	_, err = Acquire(dir, "second")
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Acquire: %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), "cardboxd serving 127.0.0.1:9009") {
		t.Errorf("error %q does not name the owner", err)
	}
	if got := Owner(dir); !strings.Contains(got, "cardboxd serving") {
		t.Errorf("Owner = %q", got)
	}

	if err := first.Unlock(); err != nil {
		t.Fatal(err)
	}
	again, err := Acquire(dir, "third")
	if err != nil {
		t.Fatalf("Acquire after Unlock: %v", err)
	}
	t.Cleanup(func() { again.Unlock() })
}
