package cxdbhttp

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/cardboxhq/cardbox/api"
)

// registerDeletion adds DELETE /v1/contexts/{id}: writers and admins of
// the context's tenant (a reader key is 403); an unknown, deleted or
// other tenant's context is 404.
func (r *Routes) registerDeletion(v *echo.Group) {
	v.DELETE("/contexts/:id", r.deleteContext)
}

func (r *Routes) deleteContext(c echo.Context) error {
	t, id, err := r.tenantAndID(c, "id")
	if err != nil {
		return err
	}
	// The audit log names the key that asked; a server without keys
	// (local mode) has no one to name but itself.
	actor := "local"
	if p, ok := api.PrincipalFrom(c.Request().Context()); ok && p.KeyID != "" {
		actor = "key:" + p.KeyID
	}
	if err := r.svc.DeleteContext(c.Request().Context(), t, id, actor); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
