package daemon_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/cardboxhq/cardbox/cxdbcompat/client"
	"github.com/cardboxhq/cardbox/internal/daemon/daemontest"
)

// On the binary port a deleted context answers every request exactly as
// a context that never existed: the same ERROR code, kind and message
// (but for the id it names).
func TestDeletedContextAnswersAsNeverExistingOnTheBinaryPort(t *testing.T) {
	d := daemontest.New(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	c, err := client.Dial(ctx, d.BinaryAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	head, err := c.CreateContext(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	first, err := c.AppendTurn(ctx, &client.AppendRequest{ContextID: head.ContextID, TypeID: "test.Note", TypeVersion: 1, Payload: []byte{0x81, 0x01, 0x02}})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, fmt.Sprintf("http://%s/v1/contexts/%d", d.HTTPAddr(), head.ContextID), nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %s, want 204", res.Status)
	}

	deleted, never := head.ContextID, head.ContextID+1000
	for _, tt := range []struct {
		name string
		call func(id uint64) error
	}{
		{"GET_HEAD", func(id uint64) error { _, err := c.GetHead(ctx, id); return err }},
		{"GET_LAST", func(id uint64) error { _, err := c.GetLast(ctx, id, 10, true); return err }},
		{"GET_BEFORE", func(id uint64) error { _, err := c.GetBefore(ctx, id, first.NewTurnID+1, 10, false); return err }},
		{"APPEND_TURN", func(id uint64) error {
			_, err := c.AppendTurn(ctx, &client.AppendRequest{ContextID: id, TypeID: "test.Note", TypeVersion: 1, Payload: []byte{0x80}})
			return err
		}},
	} {
		got, want := tt.call(deleted), tt.call(never)
		if got == nil || want == nil {
			t.Errorf("%s: deleted context %v, never-existing %v; want both to fail", tt.name, got, want)
			continue
		}
		if norm := strings.ReplaceAll(got.Error(), fmt.Sprint(deleted), fmt.Sprint(never)); norm != want.Error() {
			t.Errorf("%s: deleted context answers %q, a never-existing one %q", tt.name, got, want)
		}
	}
	// The deleted context's own turn died with its answer, before any
	// reaping: a fork from it is refused as a fork from a turn that never
	// existed.
	_, got := c.ForkContext(ctx, first.NewTurnID)
	_, want := c.ForkContext(ctx, first.NewTurnID+1000)
	if got == nil || strings.ReplaceAll(got.Error(), fmt.Sprint(first.NewTurnID), fmt.Sprint(first.NewTurnID+1000)) != want.Error() {
		t.Errorf("fork from the deleted context's turn: %v; from a turn that never existed: %v", got, want)
	}
}
