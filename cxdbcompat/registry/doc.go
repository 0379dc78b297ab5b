// Package registry is the CXDB type registry (spec sections 4.8 and 5): it
// parses registry bundles, applies the evolution rules to build immutable
// registry snapshots, answers descriptor, enum, renderer and bundle lookups,
// and renders the JSON bodies of the registry routes.
//
// It knows nothing of storage or HTTP. The store persists the raw bodies of
// created bundles in publish order and rebuilds a registry by applying them
// again, in order, to Empty().
//
// Where the reference server and cardbox's decisions disagree, the decisions
// win: every evolution conflict is ErrConflict (HTTP 409), a malformed bundle
// is ErrMalformed (HTTP 422), and ingest is all-or-nothing.
package registry
