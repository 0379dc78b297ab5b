package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/cardboxhq/cardbox/internal/auth"
	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/ratelimit"
)

// Authenticator checks the bearer keys of hosted mode (auth.Keys).
type Authenticator interface {
	Authenticate(ctx context.Context, secret string) (auth.Principal, error)
}

// KeyValidator re-checks a key (auth.Keys), for requests that outlive
// their authentication: event streams.
type KeyValidator interface {
	ValidKey(ctx context.Context, keyID string) (bool, error)
}

type principalKey struct{}

type validatorKey struct{}

// StillValid reports whether the key a long request authenticated with is
// still valid; true in dev mode, and when the check cannot be made (a
// database hiccup is no reason to cut a stream).
func StillValid(ctx context.Context) bool {
	p, ok := PrincipalFrom(ctx)
	v, _ := ctx.Value(validatorKey{}).(KeyValidator)
	if !ok || v == nil {
		return true
	}
	valid, err := v.ValidKey(ctx, p.KeyID)
	return err != nil || valid
}

// PrincipalFrom returns the principal a request acts as; false in dev
// mode, where requests carry no key.
func PrincipalFrom(ctx context.Context) (auth.Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(auth.Principal)
	return p, ok
}

// publicRoutes answer without a key: load balancers probe health, and
// the API's description is no secret.
var publicRoutes = map[string]bool{"/healthz": true, "/openapi.yaml": true}

// readPosts are the POST routes that only read (batch reads, assembly).
var readPosts = map[string]bool{
	"/projects/:project_id/cards/batch":            true,
	"/projects/:project_id/boxes/batch":            true,
	"/projects/:project_id/boxes/:box_id/assemble": true,
	"/v1/blobs/missing":                            true,
}

// operatorRoutes are for operators only: they show or act on every
// tenant's data at once.
var operatorRoutes = map[string]bool{
	"/metrics": true, "/debug/pprof/*": true,
	"/admin/compactions": true, "/admin/compactions/:id": true,
}

// authenticate is hosted mode's gate on every route but the public ones:
// a valid bearer key (else 401), a role that may do the operation (else
// 403), and a project that is the key's tenant (else 404, exactly as for
// a project that does not exist). The principal goes into the request's
// context for the routes.
func authenticate(a Authenticator, limit func(context.Context, string) (bool, time.Duration)) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			route := c.Path()
			if publicRoutes[route] {
				return next(c)
			}
			p, err := principal(c, a)
			if err != nil {
				return err
			}
			if err := authorize(c, p); err != nil {
				return err
			}
			// Operators belong to no tenant and have no tenant's rate.
			if p.Role != auth.RoleOperator {
				if err := checkRate(c, limit, p.Tenant.ID); err != nil {
					return err
				}
			}
			if project := c.Param("project_id"); strings.HasPrefix(route, "/projects/") && project != p.Tenant.ID {
				return fault.New(fault.NotFound, "project %q not found", project)
			}
			ctx := context.WithValue(c.Request().Context(), principalKey{}, p)
			if v, ok := a.(KeyValidator); ok {
				ctx = context.WithValue(ctx, validatorKey{}, v)
			}
			c.SetRequest(c.Request().WithContext(ctx))
			return next(c)
		}
	}
}

// checkRate refuses a request over its tenant's rate limit: 429 with
// Retry-After.
func checkRate(c echo.Context, limit func(context.Context, string) (bool, time.Duration), tenant string) error {
	if limit == nil {
		return nil
	}
	ok, wait := limit(c.Request().Context(), tenant)
	if ok {
		return nil
	}
	secs := ratelimit.RetryAfterSeconds(wait)
	c.Response().Header().Set("Retry-After", strconv.Itoa(secs))
	return fault.New(fault.RateLimited, "the tenant's request rate limit is reached; retry in %d s", secs).With("retry_after_ms", max(1, wait.Milliseconds()))
}

// principal authenticates the request's bearer key.
func principal(c echo.Context, a Authenticator) (auth.Principal, error) {
	secret, ok := strings.CutPrefix(c.Request().Header.Get(echo.HeaderAuthorization), "Bearer ")
	if !ok || secret == "" {
		c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="cardbox"`)
		return auth.Principal{}, fault.New(fault.Unauthorized, "send an API key: Authorization: Bearer <key>")
	}
	p, err := a.Authenticate(c.Request().Context(), secret)
	if errors.Is(err, auth.ErrUnauthenticated) {
		c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="cardbox", error="invalid_token"`)
		return auth.Principal{}, fault.New(fault.Unauthorized, "%s: this one is unknown, revoked or expired", auth.ErrUnauthenticated)
	}
	return p, err
}

// authorize checks the role against the operation: service-wide routes
// want operators, administration routes operators or a tenant's admins
// (adminhttp narrows them to the admin's tenant), data routes a key of
// a tenant (operators read no tenant's data, analysts use SQL only),
// writes a writer or admin.
func authorize(c echo.Context, p auth.Principal) error {
	route, method := c.Path(), c.Request().Method
	write := method != http.MethodGet && method != http.MethodHead && !readPosts[route]
	switch {
	case operatorRoutes[route]:
		if p.Role != auth.RoleOperator {
			return forbidden(p.Role, "use service-wide routes (operator keys only)")
		}
		return nil
	case strings.HasPrefix(route, "/admin/"):
		if !p.Role.CanAdminister() {
			return forbidden(p.Role, "administer")
		}
		return nil
	case p.Role == auth.RoleOperator:
		return forbidden(p.Role, "read or write a tenant's data (operator keys administer the service)")
	case !p.Role.CanRead():
		return forbidden(p.Role, "use the HTTP API (analyst keys are for SQL)")
	case write && !p.Role.CanWrite():
		return forbidden(p.Role, "write")
	}
	return nil
}

func forbidden(role auth.Role, what string) *fault.Error {
	return fault.New(fault.Forbidden, "%s", auth.Forbidden(role, what))
}

// RequestTenant is the tenant a request acts for, as lookup knows it:
// its key's in hosted mode, else the default tenant.
func RequestTenant(c echo.Context, lookup func(context.Context, string) (ident.Tenant, error)) (ident.Tenant, error) {
	id := ident.DefaultTenantID
	if p, ok := PrincipalFrom(c.Request().Context()); ok {
		id = p.Tenant.ID
	}
	return lookup(c.Request().Context(), id)
}
