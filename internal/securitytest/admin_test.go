package securitytest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/cardboxhq/cardbox/internal/auth"
	"github.com/cardboxhq/cardbox/internal/testkit/seed"
)

// adminTarget is what an administration request names: acme's tenant and
// keys, or things that do not exist.
type adminTarget struct {
	Tenant, Key, OperatorKey string
}

// missingTarget names a tenant and keys that nothing has.
var missingTarget = adminTarget{Tenant: "no-such-tenant", Key: "key_0000000000000000", OperatorKey: "key_0000000000000001"}

// adminCase is one administration request and the status each key gets.
type adminCase struct {
	name string
	// route is the registered route the request takes, "METHOD path" as
	// echo names it: every administration route must have a case.
	route string
	req   func(p adminTarget) request
	// want is the status by credential; globex's admin naming acme's
	// things must get exactly the answer to the same request naming
	// missing ones.
	want map[cred]int
	// list, for a listing, is its array member: a tenant's admin must see
	// its own tenant's entries alone.
	list string
}

// operatorOnly are the routes outside /admin that only operators reach;
// pprof's every method is one route.
var operatorOnly = map[string]bool{"/metrics": true, "/debug/pprof/*": true}

// adminKeys are the credentials every administration request is tried
// with, in this order: refusals first, so that a change they made would
// show; the operator last.
var adminKeys = []cred{noKey, acmeReader, acmeWriter, globexAdmin, acmeAdmin, operator}

// statuses builds a want map in adminKeys' order.
func statuses(codes ...int) map[cred]int {
	m := map[cred]int{}
	for i, c := range adminKeys {
		m[c] = codes[i]
	}
	return m
}

// get is a GET of path, with the target's tenant in place of {tenant}.
func get(path string) func(adminTarget) request {
	return func(p adminTarget) request { return request{"GET", strings.ReplaceAll(path, "{tenant}", p.Tenant), ""} }
}

var adminCases = []adminCase{
	{name: "list tenants", route: "GET /admin/tenants", req: get("/admin/tenants"), want: statuses(401, 403, 403, 200, 200, 200), list: "tenants"},
	{name: "create a tenant", route: "POST /admin/tenants", req: func(adminTarget) request {
		return request{"POST", "/admin/tenants", `{"tenant_id":"fresh-` + freshName() + `"}`}
	}, want: statuses(401, 403, 403, 403, 403, 201)},
	{name: "delete acme", route: "DELETE /admin/tenants/:tenant_id", req: func(p adminTarget) request { return request{"DELETE", "/admin/tenants/" + p.Tenant, ""} },
		// The operator's deletion is tried on a tenant of its own below.
		want: statuses(401, 403, 403, 403, 403, 0)},
	{name: "set acme's quota", route: "PUT /admin/tenants/:tenant_id/quota", req: func(p adminTarget) request {
		return request{"PUT", "/admin/tenants/" + p.Tenant + "/quota", `{"bytes":0}`}
	}, want: statuses(401, 403, 403, 403, 403, 200)},
	{name: "set acme's rate", route: "PUT /admin/tenants/:tenant_id/rate", req: func(p adminTarget) request {
		return request{"PUT", "/admin/tenants/" + p.Tenant + "/rate", `{"per_sec":0,"burst":0}`}
	}, want: statuses(401, 403, 403, 403, 403, 200)},
	{name: "set acme's retention", route: "PUT /admin/tenants/:tenant_id/retention", req: func(p adminTarget) request {
		return request{"PUT", "/admin/tenants/" + p.Tenant + "/retention", `{"max_age":"3650d"}`}
	}, want: statuses(401, 403, 403, 403, 403, 200)},
	{name: "list acme's retention", route: "GET /admin/tenants/:tenant_id/retention", req: get("/admin/tenants/{tenant}/retention"),
		want: statuses(401, 403, 403, 404, 200, 200)},
	{name: "list usage", route: "GET /admin/usage", req: get("/admin/usage"), want: statuses(401, 403, 403, 200, 200, 200), list: "tenants"},
	{name: "acme's usage", route: "GET /admin/usage", req: get("/admin/usage?tenant_id={tenant}"), want: statuses(401, 403, 403, 404, 200, 200)},
	{name: "create a key of acme", route: "POST /admin/keys", req: func(p adminTarget) request {
		return request{"POST", "/admin/keys", `{"tenant_id":"` + p.Tenant + `","role":"reader"}`}
	}, want: statuses(401, 403, 403, 404, 201, 201)},
	// A tenant's admin names none: its own; an operator must name one.
	{name: "create a key of no named tenant", route: "POST /admin/keys", req: func(adminTarget) request {
		return request{"POST", "/admin/keys", `{"role":"reader"}`}
	}, want: statuses(401, 403, 403, 201, 201, 400)},
	{name: "create an operator key", route: "POST /admin/keys", req: func(adminTarget) request {
		return request{"POST", "/admin/keys", `{"role":"operator"}`}
	}, want: statuses(401, 403, 403, 403, 403, 201)},
	{name: "list keys", route: "GET /admin/keys", req: get("/admin/keys"), want: statuses(401, 403, 403, 200, 200, 200), list: "keys"},
	{name: "list acme's keys", route: "GET /admin/keys", req: get("/admin/keys?tenant_id={tenant}"), want: statuses(401, 403, 403, 404, 200, 200), list: "keys"},
	{name: "revoke a key of acme", route: "DELETE /admin/keys/:key_id", req: func(p adminTarget) request { return request{"DELETE", "/admin/keys/" + p.Key, ""} },
		want: statuses(401, 403, 403, 404, 200, 200)},
	{name: "revoke an operator key", route: "DELETE /admin/keys/:key_id", req: func(p adminTarget) request { return request{"DELETE", "/admin/keys/" + p.OperatorKey, ""} },
		want: statuses(401, 403, 403, 404, 404, 200)},
	{name: "read the audit log", route: "GET /admin/audit", req: get("/admin/audit?limit=10000"), want: statuses(401, 403, 403, 200, 200, 200), list: "entries"},
	{name: "read acme's audit log", route: "GET /admin/audit", req: get("/admin/audit?limit=10000&tenant_id={tenant}"), want: statuses(401, 403, 403, 404, 200, 200), list: "entries"},
	{name: "service metrics", route: "GET /metrics", req: get("/metrics"), want: statuses(401, 403, 403, 403, 403, 200)},
	{name: "compact the turn log", route: "POST /admin/compactions", req: func(adminTarget) request { return request{"POST", "/admin/compactions", ""} },
		want: statuses(401, 403, 403, 403, 403, 202)},
	{name: "a compaction", route: "GET /admin/compactions/:id", req: get("/admin/compactions/999999"), want: statuses(401, 403, 403, 403, 403, 404)},
	{name: "profiles", route: "GET /debug/pprof/*", req: get("/debug/pprof/cmdline"), want: statuses(401, 403, 403, 403, 403, 200)},
}

// TestAdminScopes tries every administration request with the operator,
// acme's admin (its own tenant), globex's admin (another tenant), acme's
// writer and reader and no key. Refusals change nothing; another
// tenant's admin sees acme exactly as a missing tenant; a tenant's admin
// lists its own tenant alone.
func TestAdminScopes(t *testing.T) {
	t.Parallel()
	h := newHosted(t)
	covered := map[string]bool{}
	for _, ac := range adminCases {
		covered[ac.route] = true
	}
	for _, r := range h.handler.Routes() {
		key := r.Method + " " + r.Path
		if (strings.HasPrefix(r.Path, "/admin/") || operatorOnly[r.Path]) && !covered[key] && !covered["GET "+r.Path] {
			t.Errorf("route %s has no case in adminCases", key)
		}
	}
	for _, ac := range adminCases {
		t.Run(ac.name, func(t *testing.T) {
			for _, c := range adminKeys {
				status := ac.want[c]
				if status == 0 {
					continue
				}
				target := h.adminTarget(t)
				r := ac.req(target)
				if status >= 400 {
					h.unchanged(t, "", func() { h.wantRefusal(t, c, r, status) })
				} else {
					res := h.do(t, c, r).want(t, status)
					h.wantOwnEntries(t, c, ac.list, r, res.body)
				}
				if c == globexAdmin && status == http.StatusNotFound {
					h.wantAsMissing(t, ac, target)
				}
			}
		})
	}
	t.Run("the operator deletes a tenant", func(t *testing.T) {
		h.do(t, operator, request{"POST", "/admin/tenants", `{"tenant_id":"doomed"}`}).want(t, http.StatusCreated)
		h.do(t, operator, request{"DELETE", "/admin/tenants/doomed", ""}).want(t, http.StatusNoContent)
		h.do(t, operator, request{"DELETE", "/admin/tenants/doomed", ""}).wantError(t, http.StatusNotFound, "NOT_FOUND")
	})
}

// adminTarget makes a fresh key of acme and a fresh operator key for a
// request that may revoke one.
func (h *hosted) adminTarget(t *testing.T) adminTarget {
	t.Helper()
	k, _ := seed.Key(t, h.keys, "acme", auth.RoleReader)
	op, _ := seed.OperatorKey(t, h.keys)
	return adminTarget{Tenant: "acme", Key: k.ID, OperatorKey: op.ID}
}

// wantRefusal checks that c's request is refused with status.
func (h *hosted) wantRefusal(t *testing.T, c cred, r request, status int) {
	t.Helper()
	kind := map[int]string{400: "BAD_REQUEST", 401: "UNAUTHORIZED", 403: "FORBIDDEN", 404: "NOT_FOUND"}[status]
	h.do(t, c, r).wantError(t, status, kind)
}

// wantAsMissing checks that globex's admin gets, for acme's things,
// byte for byte the answer for things that do not exist.
func (h *hosted) wantAsMissing(t *testing.T, ac adminCase, acme adminTarget) {
	t.Helper()
	var named, missing response
	h.unchanged(t, "", func() {
		named = h.do(t, globexAdmin, ac.req(acme))
		missing = h.do(t, globexAdmin, ac.req(missingTarget))
	})
	got := string(missing.body)
	for from, to := range map[string]string{missingTarget.Tenant: acme.Tenant, missingTarget.Key: acme.Key, missingTarget.OperatorKey: acme.OperatorKey} {
		got = strings.ReplaceAll(got, from, to)
	}
	if named.status != missing.status || string(named.body) != got {
		t.Errorf("globex's admin tells acme's things from missing ones:\n acme's:  %d %s\n missing: %d %s", named.status, named.body, missing.status, missing.body)
	}
}

// wantOwnEntries checks a listing's entries: a tenant's admin sees its
// own tenant's alone; the operator, unless r names a tenant, both
// tenants'.
func (h *hosted) wantOwnEntries(t *testing.T, c cred, list string, r request, body []byte) {
	t.Helper()
	if list == "" {
		return
	}
	var page map[string][]struct {
		TenantID string `json:"tenant_id"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	var seen []string
	for _, e := range page[list] {
		if !slices.Contains(seen, e.TenantID) {
			seen = append(seen, e.TenantID)
		}
	}
	slices.Sort(seen)
	own := map[cred]string{acmeAdmin: "acme", globexAdmin: "globex"}[c]
	switch {
	case own != "" && !slices.Equal(seen, []string{own}):
		t.Errorf("%s lists the %s of tenants %q, want %q's alone: %s", c, list, seen, own, body)
	case c == operator && !strings.Contains(r.path, "tenant_id=") && (!slices.Contains(seen, "acme") || !slices.Contains(seen, "globex")):
		t.Errorf("the operator lists the %s of tenants %q, want acme's and globex's: %s", list, seen, body)
	}
}

// freshName returns a name no earlier call returned.
func freshName() string {
	freshNames++
	return fmt.Sprint(freshNames)
}

var freshNames int
