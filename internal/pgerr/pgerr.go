// Package pgerr classifies the errors that Postgres and the pgx driver
// return, so that every surface tells a client "try again later" (503) for
// the same faults and "internal error" (500) for none of them.
package pgerr

import (
	"errors"
	"net"

	"github.com/jackc/pgx/v5/pgconn"
)

// SQLSTATE codes and classes that mean the server cannot serve now, not
// that the request is wrong.
const (
	classConnection        = "08" // connection exception
	classInsufficientRes   = "53" // out of memory, disk, connections
	adminShutdown          = "57P01"
	crashShutdown          = "57P02"
	cannotConnectNow       = "57P03" // starting up, shutting down, recovering
	queryCanceled          = "57014" // statement_timeout or a cancel request
	serializationFailure   = "40001"
	deadlockDetected       = "40P01"
	idleSessionTimeout     = "57P05"
	idleInTransactionAbort = "25P03"
	diskFull               = "53100"
	uniqueViolation        = "23505"
)

// DiskFull reports whether Postgres could not write for lack of disk
// space.
func DiskFull(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == diskFull
}

// UniqueViolation reports whether a statement would have duplicated a
// unique key.
func UniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == uniqueViolation
}

// Unavailable reports whether err means Postgres could not be reached or
// could not serve the statement now: connection failures, terminated
// backends, shutdowns, too many connections, timeouts. A retry later may
// succeed; the request itself is not at fault.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return unavailableCode(pgErr.Code)
	}
	var connErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connErr) || errors.As(err, &netErr) || pgconn.Timeout(err)
}

func unavailableCode(code string) bool {
	if code == diskFull {
		return false // DiskFull: waiting does not help, freeing space does
	}
	switch code {
	case adminShutdown, crashShutdown, cannotConnectNow, queryCanceled,
		serializationFailure, deadlockDetected, idleSessionTimeout, idleInTransactionAbort:
		return true
	}
	class := code[:min(2, len(code))]
	return class == classConnection || class == classInsufficientRes
}

// DataError reports whether Postgres refused a statement for the data it
// carried (SQLSTATE class 22, data exception, or 23, integrity constraint
// violation): retrying the same statement fails again, and other
// statements are not at fault.
func DataError(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || len(pgErr.Code) < 2 {
		return false
	}
	class := pgErr.Code[:2]
	return class == "22" || class == "23"
}
