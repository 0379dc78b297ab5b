package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/cardboxhq/cardbox/cmd/internal/cli"
)

// runCLI runs cardbox with args in this process and returns what it
// printed and its exit status.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errs bytes.Buffer
	code = cli.Execute(context.Background(), commands(), args, &out, &errs)
	return out.String(), errs.String(), code
}

// cardbox runs cardbox with args in this process and returns its
// standard output and error.
func cardbox(ctx context.Context, args ...string) (string, error) {
	var out bytes.Buffer
	err := cli.Run(ctx, commands(), args, &out, &bytes.Buffer{})
	return out.String(), err
}
