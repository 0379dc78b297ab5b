// Package docs holds cardbox's published API documents.
package docs

import _ "embed"

// OpenAPI is the OpenAPI 3 document of every HTTP route (the CardBox REST
// API, the CXDB HTTP API, /admin, /metrics, /debug/pprof, /healthz and
// itself), served at GET /openapi.yaml; api's tests check it against the
// routes the server registers and the answers it gives.
//
//go:embed openapi.yaml
var OpenAPI []byte
