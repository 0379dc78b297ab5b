package tenancy

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"regexp"
)

// scramIterations is PostgreSQL's default (scram_iterations).
const scramIterations = 4096

// newSQLPassword returns a fresh password for a SQL role: 256 random bits,
// URL-safe (it goes in connection strings as is).
func newSQLPassword() string {
	var b [32]byte
	rand.Read(b[:]) // crypto/rand.Read never fails (it panics first)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// scramVerifier returns the SCRAM-SHA-256 verifier PostgreSQL stores for
// password (RFC 5802 and 7677, in PostgreSQL's text form
// SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>). Given a
// verifier, CREATE ROLE and ALTER ROLE store it as is, so the password
// itself never reaches the server, its logs or its statistics. password
// must need no SASLprep normalisation (ASCII without control characters).
func scramVerifier(password string) string {
	var salt [16]byte
	rand.Read(salt[:])
	salted, err := pbkdf2.Key(sha256.New, password, salt[:], scramIterations, sha256.Size)
	if err != nil {
		panic(fmt.Sprintf("pbkdf2: %v", err)) // only for FIPS-forbidden parameters, which these are not
	}
	storedKey := sha256.Sum256(hmacSHA256(salted, "Client Key"))
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", scramIterations, b64(salt[:]),
		b64(storedKey[:]), b64(hmacSHA256(salted, "Server Key")))
}

func hmacSHA256(key []byte, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// verifierForm is what scramVerifier returns: only characters that are
// plain inside a SQL string literal.
var verifierForm = regexp.MustCompile(`^SCRAM-SHA-256\$[0-9]+:[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+$`)

// verifierLiteral quotes a verifier as a SQL string literal; it panics on
// anything that is not one, which would be a bug here.
func verifierLiteral(v string) string {
	if !verifierForm.MatchString(v) {
		panic("auth: not a SCRAM verifier")
	}
	return "'" + v + "'"
}
