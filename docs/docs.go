// Package docs holds cardbox's published API documents.
package docs

import _ "embed"

// OpenAPI is the OpenAPI 3 document of the CardBox REST API, served at
// GET /openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte
