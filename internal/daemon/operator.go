package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
)

// ensureOperatorKey reads --operator-key-file, if set, once, and makes its
// secret an operator key (internal/tenancy's EnsureOperatorKey): how a
// container's first operator key comes from a secret file, with no CLI
// run against the database first. An unchanged file on later starts finds
// its key and does nothing; a key of the same id that was revoked, or has
// another secret or role, stops the start, saying which. The secret is
// never logged.
func (a access) ensureOperatorKey(ctx context.Context, cfg *Config, log *slog.Logger) error {
	if cfg.OperatorKeyFile == "" {
		return nil
	}
	if a.tenants == nil {
		return fmt.Errorf("--operator-key-file %s: operator keys are for hosted mode (--mode hosted); dev mode has no keys", cfg.OperatorKeyFile)
	}
	secret, err := readSecretFile(cfg.OperatorKeyFile)
	if err != nil {
		return fmt.Errorf("--operator-key-file: %w", err)
	}
	if err := a.tenants.EnsureOperatorKey(ctx, secret); err != nil {
		return fmt.Errorf("--operator-key-file %s: %w", cfg.OperatorKeyFile, err)
	}
	log.Info("operator key from --operator-key-file is in place", "file", cfg.OperatorKeyFile)
	return nil
}

// maxSecretFile bounds what is read of a secret file: a secret is 67
// bytes, so anything much larger is the wrong file.
const maxSecretFile = 4 << 10

// readSecretFile returns the file's content without surrounding
// whitespace (a trailing newline, CRLF line ends).
func readSecretFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > maxSecretFile {
		return "", fmt.Errorf("%s is over %d bytes: not a key's secret", path, maxSecretFile)
	}
	secret := strings.TrimSpace(string(b))
	if secret == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return secret, nil
}
