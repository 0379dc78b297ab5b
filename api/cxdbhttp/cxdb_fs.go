package cxdbhttp

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/cardboxhq/cardbox/api/internal/answers"
	"github.com/cardboxhq/cardbox/cxdbcompat/service"
	"github.com/cardboxhq/cardbox/internal/fault"
)

// fsList serves GET /v1/turns/{id}/fs?path=: a directory listing.
func (r *Routes) fsList(c echo.Context) error {
	t, id, err := r.tenantAndID(c, "id")
	if err != nil {
		return err
	}
	// The tree objects on the way are charged while each is read, the
	// listing before its JSON is built.
	charge := r.charge(c, t)
	defer charge.Release()
	node, err := r.svc.FS(c.Request().Context(), t, id, c.QueryParam("path"), charge.Borrow)
	if err != nil {
		return err
	}
	if node.Dir == nil {
		return fault.New(fault.Unprocessable, "path is not a directory: %s", c.QueryParam("path")).With("turn_id", idString(id))
	}
	return r.writeFSListing(c, charge, node.Dir)
}

// fsPath serves GET /v1/turns/{id}/fs/{path...}: a file's bytes (or JSON
// with format=json), or a directory's listing.
func (r *Routes) fsPath(c echo.Context) error {
	p, err := url.PathUnescape(c.Param("*"))
	if err != nil {
		return paramError("path", "not a valid percent-encoded path")
	}
	if strings.Trim(p, "/") == "" {
		return paramError("path", "empty file path")
	}
	t, id, err := r.tenantAndID(c, "id")
	if err != nil {
		return err
	}
	// The tree objects on the way are charged while each is read, a
	// listing before its JSON is built, a file once read, as a blob is.
	charge := r.charge(c, t)
	defer charge.Release()
	node, err := r.svc.FS(c.Request().Context(), t, id, p, charge.Borrow)
	if err != nil {
		return err
	}
	if node.Dir != nil {
		return r.writeFSListing(c, charge, node.Dir)
	}
	f := node.File
	if c.QueryParam("format") == "json" {
		return r.fileJSON(c, charge, id, p, f)
	}
	if err := charge.Reserve(int64(len(f.Content))); err != nil {
		return err
	}
	h := c.Response().Header()
	h.Set("X-Fs-Hash", f.Entry.Hash)
	h.Set("X-Fs-Mode", f.Entry.Mode)
	return c.Blob(http.StatusOK, contentType(f.Entry.Name), f.Content)
}

// fileJSON answers a file as JSON, its content in base64: at most
// service.MaxPageBytes of it, as a turn page; a larger file is 422, to be
// read as bytes. The JSON is written once, in a buffer of its size.
func (r *Routes) fileJSON(c echo.Context, charge *answers.Charge, id uint64, p string, f *service.FSFile) error {
	n := base64.StdEncoding.EncodedLen(len(f.Content))
	if n > service.MaxPageBytes {
		e := fault.New(fault.Unprocessable,
			"file too large for format=json: %d bytes are %d in base64, over the %d bytes an answer may hold; read it without format=json",
			len(f.Content), n, service.MaxPageBytes)
		e.Details = map[string]any{"size": len(f.Content), "limit": service.MaxPageBytes, "hash": f.Entry.Hash}
		return e
	}
	rest, err := json.Marshal(map[string]any{
		"turn_id": idString(id), "path": p, "name": f.Entry.Name, "kind": f.Entry.Kind, "mode": f.Entry.Mode,
		"size": f.Entry.Size, "hash": f.Entry.Hash,
	})
	if err != nil {
		return err
	}
	// The members in encoding/json's order, content_base64 first.
	const open = `{"content_base64":"`
	size := len(open) + n + len(`",`) + len(rest) - 1 + len("\n")
	if err := charge.Reserve(int64(size)); err != nil {
		return err
	}
	b := append(make([]byte, 0, size), open...)
	b = append(base64.StdEncoding.AppendEncode(b, f.Content), '"', ',')
	b = append(append(b, rest[1:]...), '\n')
	return c.JSONBlob(http.StatusOK, b)
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
