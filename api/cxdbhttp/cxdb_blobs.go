package cxdbhttp

import (
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/cardboxhq/cardbox/api/internal/jsonbody"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/store"
)

// missingBlobsRequest is the body of POST /v1/blobs/missing.
type missingBlobsRequest struct {
	Hashes []string `json:"hashes"`
}

// missingBlobs answers which of the hashes the tenant lacks, so that a
// client uploads only those (a snapshot of a workspace where little
// changed). Bytes only another tenant stored are missing for this one,
// in the same time as bytes nobody stored (see store.MissingBlobs).
func (r *Routes) missingBlobs(c echo.Context) error {
	t, err := r.tenant(c)
	if err != nil {
		return err
	}
	var req missingBlobsRequest
	if err := jsonbody.DecodeStrict(c, &req, false); err != nil {
		return err
	}
	if req.Hashes == nil {
		return paramError("hashes", "required: an array of hex BLAKE3-256 hashes")
	}
	if len(req.Hashes) > store.MaxMissingBlobs {
		return paramError("hashes", "%d hashes: at most %d per request", len(req.Hashes), store.MaxMissingBlobs)
	}
	hashes := make([]ident.Hash, len(req.Hashes))
	for i, s := range req.Hashes {
		raw, err := hex.DecodeString(strings.ToLower(s))
		if err != nil || len(raw) != len(ident.Hash{}) {
			return paramError(fmt.Sprintf("hashes[%d]", i), "must be 64 hex digits")
		}
		hashes[i] = ident.Hash(raw)
	}
	missing, err := r.svc.MissingBlobs(c.Request().Context(), t, hashes)
	if err != nil {
		return err
	}
	out := make([]string, len(missing))
	for i, h := range missing {
		out[i] = hex.EncodeToString(h[:])
	}
	return c.JSON(http.StatusOK, map[string][]string{"missing": out})
}
