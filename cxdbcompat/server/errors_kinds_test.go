package server

import (
	"testing"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/store"
)

// Every error kind maps to the ERROR code and name of internal/fault's
// table, which gives the HTTP surface its statuses too, and only internal
// errors are 500.
func TestEveryKindMaps(t *testing.T) {
	for _, k := range fault.Kinds {
		r := toErrorResponse(&fault.Error{Kind: k, Message: "m"})
		if r.Code != k.Code() || r.Kind != k.String() || r.Kind == "" {
			t.Errorf("kind %v: ERROR %d %s, want %d", k, r.Code, r.Kind, k.Code())
		}
		if (k == fault.Internal) != (r.Code == 500) {
			t.Errorf("kind %v is ERROR %d: only internal errors are 500", k, r.Code)
		}
	}
	// Both are 507; the detail's code tells a full disk from a quota.
	disk := toErrorResponse(&fault.Error{Kind: fault.DiskFull, Message: "m"})
	quota := toErrorResponse(store.QuotaExceeded("acme", 10, 10, 1))
	if disk.Kind != "DISK_FULL" || quota.Kind != "QUOTA_EXCEEDED" || quota.Details["quota_bytes"] != int64(10) {
		t.Errorf("full disk: %+v; quota: %+v", disk, quota)
	}
}
