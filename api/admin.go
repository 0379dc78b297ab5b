package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/cardboxhq/cardbox/internal/auth"
)

// Administration is what the admin routes do (auth.Keys).
type Administration interface {
	CreateTenant(ctx context.Context, actor, id, name string) (auth.Tenant, error)
	ListTenants(ctx context.Context) ([]auth.Tenant, error)
	DeleteTenant(ctx context.Context, actor, id string) (auth.Deletion, error)
	CreateKey(ctx context.Context, actor, tenant string, role auth.Role, expires *time.Time) (auth.Key, string, error)
	ListKeys(ctx context.Context, tenant string) ([]auth.Key, error)
	RevokeKey(ctx context.Context, actor, keyID string) (auth.Key, error)
	Audit(ctx context.Context, tenant string, max int) ([]auth.AuditEntry, error)
}

// AdminRoutes are hosted mode's tenant and key administration over HTTP,
// for admin keys: the same operations as the CLI, audited with the key
// as the actor.
type AdminRoutes struct {
	admin Administration
	usage UsageFunc // nil: tenants are listed without their usage
}

// UsageFunc reports the bytes a tenant stores and its storage quota (0:
// none).
type UsageFunc func(ctx context.Context, tenant string) (used, limit int64)

// Admin returns the admin routes. Pass them in Options.Routes in hosted
// mode only (authenticate lets admin keys alone reach /admin/).
func Admin(a Administration) *AdminRoutes { return &AdminRoutes{admin: a} }

// WithUsage lists every tenant with its usage and quota (nil: without).
func (r *AdminRoutes) WithUsage(u UsageFunc) *AdminRoutes {
	r.usage = u
	return r
}

// tenantEntry is a tenant as GET /admin/tenants lists it.
type tenantEntry struct {
	auth.Tenant
	// UsedBytes and QuotaBytes are what the tenant stores and may store
	// (0: no quota); absent without a UsageFunc.
	UsedBytes  *int64 `json:"used_bytes,omitempty"`
	QuotaBytes *int64 `json:"quota_bytes,omitempty"`
}

// Register adds the /admin routes.
func (r *AdminRoutes) Register(e *echo.Echo) {
	g := e.Group("/admin")
	g.POST("/tenants", r.createTenant)
	g.GET("/tenants", r.listTenants)
	g.DELETE("/tenants/:tenant_id", r.deleteTenant)
	g.POST("/keys", r.createKey)
	g.GET("/keys", r.listKeys)
	g.DELETE("/keys/:key_id", r.revokeKey)
	g.GET("/audit", r.audit)
}

// MapError maps administration errors.
func (r *AdminRoutes) MapError(err error) *Error {
	switch {
	case errors.Is(err, auth.ErrTenantExists), errors.Is(err, auth.ErrDefaultTenant):
		return NewError(http.StatusConflict, "%s", err)
	case errors.Is(err, auth.ErrNoTenant), errors.Is(err, auth.ErrNoKey):
		return NewError(http.StatusNotFound, "%s", err)
	case errors.Is(err, auth.ErrBadTenantName), errors.Is(err, auth.ErrBadRole), errors.Is(err, auth.ErrBadExpiry), errors.Is(err, auth.ErrBadRate):
		return NewError(http.StatusBadRequest, "%s", err)
	}
	return nil
}

// actor names the admin key in the audit log.
func actor(c echo.Context) string {
	p, _ := PrincipalFrom(c.Request().Context())
	return "key:" + p.KeyID
}

func (r *AdminRoutes) createTenant(c echo.Context) error {
	var req struct {
		TenantID string `json:"tenant_id"`
		Name     string `json:"name"`
	}
	if err := decodeStrict(c, &req, false); err != nil {
		return err
	}
	t, err := r.admin.CreateTenant(c.Request().Context(), actor(c), req.TenantID, req.Name)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, t)
}

func (r *AdminRoutes) listTenants(c echo.Context) error {
	ctx := c.Request().Context()
	ts, err := r.admin.ListTenants(ctx)
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

// deleteTenant deletes a tenant and everything it owns at once (204; 404
// when it does not exist or was deleted already). The audit log records
// how many rows of each table went.
func (r *AdminRoutes) deleteTenant(c echo.Context) error {
	if _, err := r.admin.DeleteTenant(c.Request().Context(), actor(c), c.Param("tenant_id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (r *AdminRoutes) createKey(c echo.Context) error {
	var req struct {
		TenantID  string     `json:"tenant_id"`
		Role      auth.Role  `json:"role"`
		ExpiresAt *time.Time `json:"expires_at"`
	}
	if err := decodeStrict(c, &req, false); err != nil {
		return err
	}
	key, secret, err := r.admin.CreateKey(c.Request().Context(), actor(c), req.TenantID, req.Role, req.ExpiresAt)
	if err != nil {
		return err
	}
	// The only time the secret is shown.
	return c.JSON(http.StatusCreated, map[string]any{"key": key, "secret": secret})
}

func (r *AdminRoutes) listKeys(c echo.Context) error {
	keys, err := r.admin.ListKeys(c.Request().Context(), c.QueryParam("tenant_id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"keys": keys})
}

func (r *AdminRoutes) revokeKey(c echo.Context) error {
	key, err := r.admin.RevokeKey(c.Request().Context(), actor(c), c.Param("key_id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, key)
}

func (r *AdminRoutes) audit(c echo.Context) error {
	limit := 100
	if s := c.QueryParam("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 10_000 {
			return NewError(http.StatusBadRequest, "limit: want 1 to 10000").with("param", "limit")
		}
		limit = n
	}
	entries, err := r.admin.Audit(c.Request().Context(), c.QueryParam("tenant_id"), limit)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"entries": entries})
}
