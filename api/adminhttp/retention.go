package adminhttp

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/cardboxhq/cardbox/api/internal/jsonbody"
	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/tenancy"
)

// retentionEntry is a retention policy as the routes show it: durations
// in whole seconds, null for no limit of that kind.
type retentionEntry struct {
	TenantID      string `json:"tenant_id"`
	Label         string `json:"label"`
	IdleSeconds   *int64 `json:"idle_seconds"`
	MaxAgeSeconds *int64 `json:"max_age_seconds"`
}

func entryOf(r tenancy.Retention) retentionEntry {
	e := retentionEntry{TenantID: r.TenantID, Label: r.Label}
	if r.Idle > 0 {
		s := int64(r.Idle.Seconds())
		e.IdleSeconds = &s
	}
	if r.MaxAge > 0 {
		s := int64(r.MaxAge.Seconds())
		e.MaxAgeSeconds = &s
	}
	return e
}

// setRetention sets a tenant's retention policy for a label (operator
// keys): {"label": L, "idle": D, "max_age": A}, each duration a Go
// duration or whole days ("30d"), at least one given; neither removes the
// label's policy. A duration that does not parse or is not above a second
// is 400 naming its field.
func (r *Routes) setRetention(c echo.Context) error {
	actor, err := operator(c, "set retention policies")
	if err != nil {
		return err
	}
	var req struct {
		Label  string `json:"label"`
		Idle   string `json:"idle"`
		MaxAge string `json:"max_age"`
	}
	if err := jsonbody.DecodeStrict(c, &req, false); err != nil {
		return err
	}
	idle, err := tenancy.ParseRetentionDuration("idle", req.Idle)
	if err != nil {
		return fault.New(fault.Invalid, "%s", err).With("field", "idle")
	}
	maxAge, err := tenancy.ParseRetentionDuration("max_age", req.MaxAge)
	if err != nil {
		return fault.New(fault.Invalid, "%s", err).With("field", "max_age")
	}
	policy := tenancy.Retention{TenantID: c.Param("tenant_id"), Label: req.Label, Idle: idle, MaxAge: maxAge}
	ctx := c.Request().Context()
	if policy.Idle == 0 && policy.MaxAge == 0 {
		if err := r.admin.ClearRetention(ctx, actor, policy.TenantID, policy.Label); err != nil {
			return err
		}
		return c.NoContent(http.StatusNoContent)
	}
	if err := r.admin.SetRetention(ctx, actor, policy); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, entryOf(policy))
}

// listRetention lists a tenant's retention policies (operator keys, and
// the tenant's own admin keys).
func (r *Routes) listRetention(c echo.Context) error {
	_, _, tenant, err := scopedTenant(c, c.Param("tenant_id"))
	if err != nil {
		return err
	}
	policies, err := r.admin.Retentions(c.Request().Context(), tenant)
	if err != nil {
		return err
	}
	out := make([]retentionEntry, len(policies))
	for i, p := range policies {
		out[i] = entryOf(p)
	}
	return c.JSON(http.StatusOK, map[string]any{"policies": out})
}
