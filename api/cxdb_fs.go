package api

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/cardboxhq/cardbox/cxdbcompat/service"
)

// fsList serves GET /v1/turns/{id}/fs?path=: a directory listing.
func (r *CXDBRoutes) fsList(c echo.Context) error {
	node, id, err := r.fsNode(c, c.QueryParam("path"))
	if err != nil {
		return err
	}
	if node.Dir == nil {
		return NewError(http.StatusUnprocessableEntity, "path is not a directory: %s", c.QueryParam("path")).with("turn_id", idString(id))
	}
	return c.JSON(http.StatusOK, node.Dir)
}

// fsPath serves GET /v1/turns/{id}/fs/{path...}: a file's bytes (or JSON
// with format=json), or a directory's listing.
func (r *CXDBRoutes) fsPath(c echo.Context) error {
	p, err := url.PathUnescape(c.Param("*"))
	if err != nil {
		return paramError("path", "not a valid percent-encoded path")
	}
	if strings.Trim(p, "/") == "" {
		return paramError("path", "empty file path")
	}
	node, id, err := r.fsNode(c, p)
	if err != nil {
		return err
	}
	if node.Dir != nil {
		return c.JSON(http.StatusOK, node.Dir)
	}
	f := node.File
	if c.QueryParam("format") == "json" {
		return c.JSON(http.StatusOK, map[string]any{
			"turn_id": idString(id), "path": p, "name": f.Entry.Name, "kind": f.Entry.Kind, "mode": f.Entry.Mode,
			"size": f.Entry.Size, "hash": f.Entry.Hash, "content_base64": base64.StdEncoding.EncodeToString(f.Content),
		})
	}
	h := c.Response().Header()
	h.Set("X-Fs-Hash", f.Entry.Hash)
	h.Set("X-Fs-Mode", f.Entry.Mode)
	return c.Blob(http.StatusOK, contentType(f.Entry.Name), f.Content)
}

func (r *CXDBRoutes) fsNode(c echo.Context, p string) (service.FSNode, uint64, error) {
	t, id, err := r.tenantAndID(c, "id")
	if err != nil {
		return service.FSNode{}, 0, err
	}
	node, err := r.svc.FS(c.Request().Context(), t, id, p)
	return node, id, err
}

// contentTypes are the reference server's types by file extension.
var contentTypes = map[string]string{
	"html": "text/html", "htm": "text/html", "css": "text/css", "js": "application/javascript",
	"json": "application/json", "xml": "application/xml", "txt": "text/plain", "md": "text/markdown",
	"rs": "text/x-rust", "go": "text/x-go", "py": "text/x-python", "rb": "text/x-ruby", "java": "text/x-java",
	"c": "text/x-c", "h": "text/x-c", "cpp": "text/x-c++", "cc": "text/x-c++", "cxx": "text/x-c++", "hpp": "text/x-c++",
	"ts": "text/typescript", "tsx": "text/typescript-jsx", "jsx": "text/javascript-jsx", "yaml": "text/yaml",
	"yml": "text/yaml", "toml": "text/toml", "sh": "text/x-shellscript", "bash": "text/x-shellscript",
	"png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif", "svg": "image/svg+xml",
	"webp": "image/webp", "pdf": "application/pdf", "zip": "application/zip", "tar": "application/x-tar",
	"gz": "application/gzip",
}

func contentType(name string) string {
	if t, ok := contentTypes[strings.ToLower(strings.TrimPrefix(path.Ext(name), "."))]; ok {
		return t
	}
	return echo.MIMEOctetStream
}
