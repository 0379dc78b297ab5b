package server

import (
	"testing"

	"github.com/cardboxhq/cardbox/internal/quota"
	"github.com/cardboxhq/cardbox/store"
)

// Every store error kind maps to an ERROR code that is its HTTP status
// on the HTTP surface (api.StoreErrors), and only internal errors are 500.
func TestEveryStoreKindMaps(t *testing.T) {
	want := map[store.Kind]uint32{
		store.KindInvalid: 400, store.KindNotFound: 404, store.KindConflict: 409, store.KindUnprocessable: 422,
		store.KindUnavailable: 503, store.KindDiskFull: 507, store.KindQuotaExceeded: 507, store.KindHeadMoved: 409, store.KindInternal: 500,
	}
	for _, k := range store.Kinds {
		r := toErrorResponse(&store.Error{Kind: k, Msg: "m"})
		if r.Code != want[k] || r.Kind == "" {
			t.Errorf("kind %v: ERROR %d %s, want %d", k, r.Code, r.Kind, want[k])
		}
	}
	// Both are 507; the detail's code tells a full disk from a quota.
	disk := toErrorResponse(&store.Error{Kind: store.KindDiskFull, Msg: "m"})
	refused := toErrorResponse(quota.Exceeded("acme", 10, 10, 1))
	if disk.Kind != "DISK_FULL" || refused.Kind != "QUOTA_EXCEEDED" || refused.Details["quota_bytes"] != int64(10) {
		t.Errorf("full disk: %+v; quota: %+v", disk, refused)
	}
}
