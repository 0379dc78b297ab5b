package store

import "github.com/cardboxhq/cardbox/store/internal/storetype"

// The store's errors are *fault.Error values (internal/fault): each
// surface maps their kinds to its own codes in one place. A Postgres
// cause takes its kind in fault.Wrap, which makes a full Postgres disk
// fault.DiskFull whatever kind the caller named.

// ErrClosed is returned by calls made after Close.
var ErrClosed = storetype.ErrClosed
