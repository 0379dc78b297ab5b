// Package adminhttp serves hosted mode's administration over HTTP
// (/admin/...): tenants, keys, quotas, rates, usage and the audit log.
// Package api is the server it is registered on; its authentication lets
// only operator and admin keys reach these routes.
package adminhttp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/cardboxhq/cardbox/api"
	"github.com/cardboxhq/cardbox/api/internal/jsonbody"
	"github.com/cardboxhq/cardbox/internal/auth"
	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/tenancy"
)

// Administration is what the admin routes do (tenancy.Admin).
type Administration interface {
	CreateTenant(ctx context.Context, actor, id, name string) (tenancy.Tenant, error)
	ListTenants(ctx context.Context) ([]tenancy.Tenant, error)
	DeleteTenant(ctx context.Context, actor, id string) (tenancy.Deletion, error)
	CreateKey(ctx context.Context, actor, tenant string, role auth.Role, expires *time.Time) (tenancy.Key, string, error)
	CreateOperatorKey(ctx context.Context, actor string, expires *time.Time) (tenancy.Key, string, error)
	ListKeys(ctx context.Context, tenant string) ([]tenancy.Key, error)
	RevokeKeyOf(ctx context.Context, actor, tenant, keyID string) (tenancy.Key, error)
	Audit(ctx context.Context, tenant string, max int) ([]tenancy.AuditEntry, error)
	SetQuota(ctx context.Context, actor, tenant string, bytes int64) error
	SetRate(ctx context.Context, actor, tenant string, r tenancy.Rate) error
	TenantRate(ctx context.Context, tenant string) (tenancy.Rate, error)
	SetRetention(ctx context.Context, actor string, r tenancy.Retention) error
	ClearRetention(ctx context.Context, actor, tenant, label string) error
	Retentions(ctx context.Context, tenant string) ([]tenancy.Retention, error)
}

// Routes are hosted mode's administration over HTTP, audited with
// the key as the actor. An operator key reaches every tenant; a tenant's
// admin key its own tenant's keys, audit records and usage, and sees
// other tenants exactly as missing ones (auth.Scope).
type Routes struct {
	admin Administration
	usage UsageFunc // nil: tenants are listed without their usage
}

// UsageFunc reports the bytes a tenant stores and its storage quota (0:
// none).
type UsageFunc func(ctx context.Context, tenant string) (used, limit int64)

// New returns the admin routes. Pass them in api.Options.Routes in hosted
// mode only (authenticate lets administering keys alone reach /admin/).
func New(a Administration) *Routes { return &Routes{admin: a} }

// WithUsage lists every tenant with its usage and quota (nil: without).
func (r *Routes) WithUsage(u UsageFunc) *Routes {
	r.usage = u
	return r
}

// tenantEntry is a tenant as GET /admin/tenants lists it.
type tenantEntry struct {
	tenancy.Tenant
	// UsedBytes and QuotaBytes are what the tenant stores and may store
	// (0: no quota); absent without a UsageFunc.
	UsedBytes  *int64 `json:"used_bytes,omitempty"`
	QuotaBytes *int64 `json:"quota_bytes,omitempty"`
}

// usageEntry is a tenant as GET /admin/usage lists it: its rate limit is
// 0 and 0 when it takes the server's default.
type usageEntry struct {
	TenantID   string `json:"tenant_id"`
	UsedBytes  int64  `json:"used_bytes"`
	QuotaBytes int64  `json:"quota_bytes"`
	Rate       struct {
		PerSec float64 `json:"per_sec"`
		Burst  int     `json:"burst"`
	} `json:"rate"`
}

// Register adds the /admin routes.
func (r *Routes) Register(e *echo.Echo) {
	g := e.Group("/admin")
	g.POST("/tenants", r.createTenant)
	g.GET("/tenants", r.listTenants)
	g.DELETE("/tenants/:tenant_id", r.deleteTenant)
	g.PUT("/tenants/:tenant_id/quota", r.setQuota)
	g.PUT("/tenants/:tenant_id/rate", r.setRate)
	g.PUT("/tenants/:tenant_id/retention", r.setRetention)
	g.GET("/tenants/:tenant_id/retention", r.listRetention)
	g.GET("/usage", r.listUsage)
	g.POST("/keys", r.createKey)
	g.GET("/keys", r.listKeys)
	g.DELETE("/keys/:key_id", r.revokeKey)
	g.GET("/audit", r.audit)
}

// MapError gives administration errors (internal/auth's) their kinds; the
// message is the error's whole text.
func (r *Routes) MapError(err error) *fault.Error {
	switch {
	case errors.Is(err, auth.ErrForbidden):
		return fault.New(fault.Forbidden, "%s", err)
	case errors.Is(err, tenancy.ErrTenantExists), errors.Is(err, tenancy.ErrDefaultTenant):
		return fault.New(fault.Conflict, "%s", err)
	case errors.Is(err, auth.ErrNoTenant), errors.Is(err, tenancy.ErrNoKey):
		return fault.New(fault.NotFound, "%s", err)
	case errors.Is(err, tenancy.ErrBadTenantName), errors.Is(err, auth.ErrBadRole), errors.Is(err, tenancy.ErrBadExpiry),
		errors.Is(err, tenancy.ErrBadRate), errors.Is(err, tenancy.ErrBadQuota), errors.Is(err, tenancy.ErrOperatorTenant),
		errors.Is(err, tenancy.ErrBadRetention):
		return fault.New(fault.Invalid, "%s", err)
	}
	return nil
}

// caller is the administering key of a request: its scope and its name
// in the audit log.
func caller(c echo.Context) (auth.Scope, string, error) {
	p, _ := api.PrincipalFrom(c.Request().Context())
	scope, err := auth.ScopeOf(p)
	return scope, "key:" + p.KeyID, err
}

// operator is caller for what only operators may do.
func operator(c echo.Context, what string) (string, error) {
	scope, actor, err := caller(c)
	if err == nil {
		err = scope.Operate(what)
	}
	return actor, err
}

// scopedTenant is caller with the tenant a request names (in param or
// query), checked against the key's scope.
func scopedTenant(c echo.Context, named string) (auth.Scope, string, string, error) {
	scope, actor, err := caller(c)
	if err != nil {
		return scope, "", "", err
	}
	tenant, err := scope.Tenant(named)
	return scope, actor, tenant, err
}

func (r *Routes) createTenant(c echo.Context) error {
	actor, err := operator(c, "create tenants")
	if err != nil {
		return err
	}
	var req struct {
		TenantID string `json:"tenant_id"`
		Name     string `json:"name"`
	}
	if err := jsonbody.DecodeStrict(c, &req, false); err != nil {
		return err
	}
	t, err := r.admin.CreateTenant(c.Request().Context(), actor, req.TenantID, req.Name)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, t)
}

func (r *Routes) listTenants(c echo.Context) error {
	ctx := c.Request().Context()
	scope, _, err := caller(c)
	if err != nil {
		return err
	}
	ts, err := r.visibleTenants(ctx, scope)
	if err != nil {
		return err
	}
	out := make([]tenantEntry, len(ts))
	for i, t := range ts {
		out[i].Tenant = t
		if r.usage != nil {
			used, limit := r.usage(ctx, t.ID)
			out[i].UsedBytes, out[i].QuotaBytes = &used, &limit
		}
	}
	return c.JSON(http.StatusOK, map[string]any{"tenants": out})
}

// visibleTenants are the live tenants scope reaches.
func (r *Routes) visibleTenants(ctx context.Context, scope auth.Scope) ([]tenancy.Tenant, error) {
	ts, err := r.admin.ListTenants(ctx)
	if err != nil || scope.Operator() {
		return ts, err
	}
	return slices.DeleteFunc(ts, func(t tenancy.Tenant) bool { return t.ID != scope.Own() }), nil
}

// deleteTenant deletes a tenant and everything it owns at once (204; 404
// when it does not exist or was deleted already). The audit log records
// how many rows of each table went.
func (r *Routes) deleteTenant(c echo.Context) error {
	actor, err := operator(c, "delete tenants")
	if err != nil {
		return err
	}
	if _, err := r.admin.DeleteTenant(c.Request().Context(), actor, c.Param("tenant_id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// setQuota sets a tenant's storage quota: {"bytes": N}, 0 for the
// server's default.
func (r *Routes) setQuota(c echo.Context) error {
	actor, err := operator(c, "set quotas")
	if err != nil {
		return err
	}
	var req struct {
		Bytes *int64 `json:"bytes"`
	}
	if err := jsonbody.DecodeStrict(c, &req, false); err != nil {
		return err
	}
	if req.Bytes == nil {
		return fault.New(fault.Invalid, "bytes: is required (0 for the server's default)").With("field", "bytes")
	}
	tenant := c.Param("tenant_id")
	if err := r.admin.SetQuota(c.Request().Context(), actor, tenant, *req.Bytes); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, struct {
		TenantID   string `json:"tenant_id"`
		QuotaBytes int64  `json:"quota_bytes"`
	}{tenant, *req.Bytes})
}

// setRate sets a tenant's request rate limit: {"per_sec": X, "burst": N},
// both 0 for the server's default.
func (r *Routes) setRate(c echo.Context) error {
	actor, err := operator(c, "set rate limits")
	if err != nil {
		return err
	}
	var req tenancy.Rate
	if err := jsonbody.DecodeStrict(c, &req, false); err != nil {
		return err
	}
	tenant := c.Param("tenant_id")
	if err := r.admin.SetRate(c.Request().Context(), actor, tenant, req); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, struct {
		TenantID string  `json:"tenant_id"`
		PerSec   float64 `json:"per_sec"`
		Burst    int     `json:"burst"`
	}{tenant, req.PerSec, req.Burst})
}

// listUsage lists the tenants the key reaches (?tenant_id= for one) with
// their stored bytes, quota and rate limit.
func (r *Routes) listUsage(c echo.Context) error {
	ctx := c.Request().Context()
	scope, _, named, err := scopedTenant(c, c.QueryParam("tenant_id"))
	if err != nil {
		return err
	}
	ts, err := r.visibleTenants(ctx, scope)
	if err != nil {
		return err
	}
	out := []usageEntry{}
	for _, t := range ts {
		if named != "" && t.ID != named {
			continue
		}
		e := usageEntry{TenantID: t.ID}
		if r.usage != nil {
			e.UsedBytes, e.QuotaBytes = r.usage(ctx, t.ID)
		}
		rate, err := r.admin.TenantRate(ctx, t.ID)
		if err != nil {
			return err
		}
		e.Rate.PerSec, e.Rate.Burst = rate.PerSec, rate.Burst
		out = append(out, e)
	}
	if named != "" && len(out) == 0 {
		return fmt.Errorf("usage of tenant %q: %w", named, auth.ErrNoTenant)
	}
	return c.JSON(http.StatusOK, map[string]any{"tenants": out})
}

// createKey creates a key: {"tenant_id", "role", "expires_at"}. A
// tenant's admin may leave out tenant_id (its own); an operator key
// ("role": "operator") has none.
func (r *Routes) createKey(c echo.Context) error {
	var req struct {
		TenantID  string     `json:"tenant_id"`
		Role      auth.Role  `json:"role"`
		ExpiresAt *time.Time `json:"expires_at"`
	}
	if err := jsonbody.DecodeStrict(c, &req, false); err != nil {
		return err
	}
	scope, actor, err := caller(c)
	if err != nil {
		return err
	}
	if _, err := auth.ParseRole(string(req.Role)); err != nil {
		return err
	}
	if err := scope.CreatesRole(req.Role); err != nil {
		return err
	}
	ctx := c.Request().Context()
	var (
		key    tenancy.Key
		secret string
	)
	if req.Role == auth.RoleOperator {
		if req.TenantID != "" {
			return tenancy.ErrOperatorTenant
		}
		key, secret, err = r.admin.CreateOperatorKey(ctx, actor, req.ExpiresAt)
	} else {
		tenant, terr := scope.Tenant(req.TenantID)
		if terr != nil {
			return terr
		}
		if tenant == "" { // an operator named none
			return fault.New(fault.Invalid, "tenant_id: is required for a key of role %q", req.Role).With("field", "tenant_id")
		}
		key, secret, err = r.admin.CreateKey(ctx, actor, tenant, req.Role, req.ExpiresAt)
	}
	if err != nil {
		return err
	}
	// The only time the secret is shown.
	return c.JSON(http.StatusCreated, map[string]any{"key": key, "secret": secret})
}

func (r *Routes) listKeys(c echo.Context) error {
	_, _, tenant, err := scopedTenant(c, c.QueryParam("tenant_id"))
	if err != nil {
		return err
	}
	keys, err := r.admin.ListKeys(c.Request().Context(), tenant)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"keys": keys})
}

func (r *Routes) revokeKey(c echo.Context) error {
	scope, actor, err := caller(c)
	if err != nil {
		return err
	}
	key, err := r.admin.RevokeKeyOf(c.Request().Context(), actor, scope.Own(), c.Param("key_id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, key)
}

func (r *Routes) audit(c echo.Context) error {
	limit := 100
	if s := c.QueryParam("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 10_000 {
			return fault.New(fault.Invalid, "limit: want 1 to 10000").With("param", "limit")
		}
		limit = n
	}
	_, _, tenant, err := scopedTenant(c, c.QueryParam("tenant_id"))
	if err != nil {
		return err
	}
	entries, err := r.admin.Audit(c.Request().Context(), tenant, limit)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"entries": entries})
}
