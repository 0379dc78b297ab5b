package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/cardboxhq/cardbox/internal/daemon/daemontest"
)

// `cardbox context delete` deletes a context of the server at --http-addr:
// the context then answers 404, and deleting it again, or a context that
// never existed, fails naming the server's answer.
func TestContextDelete(t *testing.T) {
	d := daemontest.New(t, nil)
	addr := d.HTTPAddr()
	res, err := http.Post("http://"+addr+"/v1/contexts/create", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	var created struct {
		ContextID string `json:"context_id"`
	}
	err = json.NewDecoder(res.Body).Decode(&created)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusCreated {
		t.Fatalf("create a context: %s, %v", res.Status, err)
	}

	for _, tt := range []struct {
		id, wantOut, wantErr string
	}{
		{created.ContextID, "deleted context " + created.ContextID + "\n", ""},
		{created.ContextID, "", "404 Not Found (NOT_FOUND): context "},
		{"900000000001", "", "404 Not Found (NOT_FOUND): context "},
	} {
		out, err := cardbox(context.Background(), "context", "delete", tt.id, "--http-addr", addr)
		if out != tt.wantOut || (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("context delete %s: %q, %v; want %q and an error containing %q", tt.id, out, err, tt.wantOut, tt.wantErr)
		}
	}
	res, err = http.Get("http://" + addr + "/v1/contexts/" + created.ContextID)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Errorf("GET the deleted context: %s, want 404", res.Status)
	}
}

// A context id that is no positive integer is a usage error: nothing is
// sent.
func TestContextDeleteWantsAnID(t *testing.T) {
	for _, arg := range []string{"abc", "0", "-1"} {
		_, stderr, code := runCLI(t, "context", "delete", "--http-addr", "127.0.0.1:1", "--", arg)
		if code != 2 || !strings.HasPrefix(stderr, "cardbox context delete: ") {
			t.Errorf("context delete %q: exit %d, stderr %q; want 2 and a usage line", arg, code, stderr)
		}
	}
}
