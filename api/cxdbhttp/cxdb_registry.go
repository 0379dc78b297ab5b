package cxdbhttp

import (
	"encoding/hex"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/cardboxhq/cardbox/api/internal/jsonbody"
	"github.com/cardboxhq/cardbox/cxdbcompat/registry"
	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
)

func (r *Routes) putBundle(c echo.Context) error {
	id, err := pathParam(c, "bundle_id")
	if err != nil {
		return err
	}
	body, err := jsonbody.Read(c.Request())
	if err != nil {
		return err
	}
	// What no id or label may hold (NUL, invalid UTF-8, lone surrogates)
	// is refused before the bundle is parsed, naming where it is.
	if e := jsonbody.Check(body, nil); e != nil {
		return e
	}
	t, err := r.tenant(c)
	if err != nil {
		return err
	}
	created, err := r.svc.PublishBundle(c.Request().Context(), t, id, body)
	if err != nil {
		return err
	}
	if !created {
		return c.NoContent(http.StatusNoContent)
	}
	return c.JSON(http.StatusCreated, map[string]string{"bundle_id": id})
}

func (r *Routes) getBundle(c echo.Context) error {
	id, err := pathParam(c, "bundle_id")
	if err != nil {
		return err
	}
	reg, err := r.registry(c)
	if err != nil {
		return err
	}
	raw, etag, ok := reg.Bundle(id)
	if !ok {
		return fault.New(fault.NotFound, "bundle %q not found", id)
	}
	if c.Request().Header.Get("If-None-Match") == etag {
		return c.NoContent(http.StatusNotModified)
	}
	c.Response().Header().Set("ETag", etag)
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, raw)
}

// listTypes answers every type of the tenant's registry, charged to the
// answer budget before its JSON is built.
func (r *Routes) listTypes(c echo.Context) error {
	t, err := r.tenant(c)
	if err != nil {
		return err
	}
	reg, err := r.svc.Registry(c.Request().Context(), t)
	if err != nil {
		return err
	}
	types := reg.Types()
	charge := r.charge(c, t)
	defer charge.Release()
	return writeChargedJSON(c, charge, typesSize(types), map[string]any{"types": types})
}

func (r *Routes) getTypeVersion(c echo.Context) error {
	typeID, err := pathParam(c, "type_id")
	if err != nil {
		return err
	}
	v, err := idParam32(c, "version")
	if err != nil {
		return err
	}
	reg, err := r.registry(c)
	if err != nil {
		return err
	}
	d, ok := reg.Descriptor(typeID, v)
	if !ok {
		return fault.New(fault.NotFound, "type %s version %d not found", typeID, v)
	}
	b, err := registry.DescriptorJSON(d)
	if err != nil {
		return err
	}
	return c.JSONBlob(http.StatusOK, b)
}

func (r *Routes) renderers(c echo.Context) error {
	reg, err := r.registry(c)
	if err != nil {
		return err
	}
	b, err := reg.RenderersJSON()
	if err != nil {
		return err
	}
	return c.JSONBlob(http.StatusOK, b)
}

func (r *Routes) registry(c echo.Context) (*registry.Registry, error) {
	t, err := r.tenant(c)
	if err != nil {
		return nil, err
	}
	return r.svc.Registry(c.Request().Context(), t)
}

func idParam32(c echo.Context, name string) (uint32, error) {
	id, err := idParam(c, name)
	if err != nil || id > 1<<32-1 {
		return 0, paramError(name, "must be a decimal u32, got %q", c.Param(name))
	}
	return uint32(id), nil
}

// getBlob serves a blob's bytes by its BLAKE3-256 hex hash.
func (r *Routes) getBlob(c echo.Context) error {
	raw, err := hex.DecodeString(strings.ToLower(c.Param("hash")))
	if err != nil || len(raw) != len(ident.Hash{}) {
		return paramError("hash", "must be 64 hex digits")
	}
	t, err := r.tenant(c)
	if err != nil {
		return err
	}
	data, err := r.svc.GetBlob(c.Request().Context(), t, ident.Hash(raw))
	if err != nil {
		return err
	}
	// Charged once read, as GET_BLOB is: its size is known then.
	charge := r.charge(c, t)
	defer charge.Release()
	if err := charge.Reserve(int64(len(data))); err != nil {
		return err
	}
	return c.Blob(http.StatusOK, echo.MIMEOctetStream, data)
}
