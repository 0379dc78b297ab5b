// Package testkit is what cardbox's tests share beyond a database and a
// server: the rule for a missing prerequisite (fail in CI, skip loudly
// elsewhere), the shared CXDB fixtures beside the repository, and a
// settable clock.
//
// The rest of the kit lives where it already did: real Postgres databases
// come from internal/pgtest, a whole server from internal/daemon/daemontest,
// the project's commands built once per test binary from internal/testbin,
// polling for a condition from internal/waitfor, and tenants and keys from
// internal/testkit/seed. This package imports only the standard library,
// so the tests of any package, however low, may use it.
package testkit
