// Package securitytest is hosted mode's security suite. Its
// tests start cardbox as cmd/cardboxd wires it in hosted mode (real
// Postgres, real data files, API keys on both listeners), seed a tenant
// through the real surfaces, and then try every HTTP route and every
// binary message type without a key, with a bad, revoked or expired one,
// with a key of the wrong role and with another tenant's key holding this
// tenant's ids. Each answer is checked, and so is that nothing changed:
// the tenant-owned rows in Postgres and the data files.
//
// A route or message type added later without a case here fails the suite.
// The package has no code of its own beyond this comment.
package securitytest
