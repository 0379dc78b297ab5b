package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"strings"
)

const secretPrefix = "cbk_"

// NewSecret returns a fresh key id, its secret and the secret's hash.
func NewSecret() (keyID, secret string, hash [32]byte) {
	var id [8]byte
	var random [32]byte
	rand.Read(id[:]) // crypto/rand.Read never fails (it panics first)
	rand.Read(random[:])
	keyID = "key_" + hex.EncodeToString(id[:])
	secret = secretPrefix + keyID + "_" + base64.RawURLEncoding.EncodeToString(random[:])
	return keyID, secret, sha256.Sum256([]byte(secret))
}

// KeyIDOf returns the key id a secret names ("cbk_" + "key_<16 hex>" +
// "_" + 43 base64url characters), or false when it is not in that format.
func KeyIDOf(secret string) (string, bool) {
	rest, ok := strings.CutPrefix(secret, secretPrefix)
	if !ok || len(rest) != keyIDLen+1+43 || !strings.HasPrefix(rest, "key_") || rest[keyIDLen] != '_' {
		return "", false
	}
	if _, err := hex.DecodeString(rest[4:keyIDLen]); err != nil {
		return "", false
	}
	return rest[:keyIDLen], true
}

// keyIDLen is the length of "key_" and 16 hex digits.
const keyIDLen = 4 + 16

// SecretMatches reports whether secret hashes to hash, in constant time.
func SecretMatches(secret string, hash []byte) bool {
	sum := sha256.Sum256([]byte(secret))
	return subtle.ConstantTimeCompare(sum[:], hash) == 1
}
