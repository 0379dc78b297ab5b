// Package pgerr classifies the errors that Postgres and the pgx driver
// return. It is the one place where a Postgres error takes a meaning for
// the client: every surface tells it "try again later" (503) for the same
// faults, "the disk is full" (507 DISK_FULL) for the same faults, and
// "internal error" (500) for none of them.
package pgerr

import (
	"errors"
	"net"

	"github.com/jackc/pgx/v5/pgconn"
)

// Class is what a Postgres error means for the request that met it.
type Class int

// Classes of errors, and the status each surface answers them with.
const (
	// ClassOther: none of the below (a bug, a missing object, a
	// privilege): 500 unless the caller knows better.
	ClassOther Class = iota
	// ClassUnavailable: Postgres could not be reached or could not serve
	// now; a retry later may succeed and the request is not at fault: 503.
	ClassUnavailable
	// ClassDiskFull: Postgres could not write for lack of disk space
	// (SQLSTATE 53100, whether the statement failed or the server
	// panicked): 507 DISK_FULL. Waiting does not help, freeing space does.
	ClassDiskFull
	// ClassData: Postgres refused the statement for the data it carried
	// (SQLSTATE class 22 or 23): retrying it fails again.
	ClassData
)

// String names the class.
func (c Class) String() string {
	switch c {
	case ClassUnavailable:
		return "unavailable"
	case ClassDiskFull:
		return "disk full"
	case ClassData:
		return "data"
	}
	return "other"
}

// SQLSTATE codes and classes, and what they mean here:
//
//	class 08 connection exception            unavailable
//	class 53 insufficient resources:
//	  53100 disk_full                         disk full
//	  53000, 53200 out_of_memory,
//	  53300 too_many_connections,
//	  53400 configuration_limit_exceeded      unavailable
//	57P01 admin_shutdown, 57P02 crash_shutdown,
//	57P03 cannot_connect_now, 57P05 idle_session_timeout,
//	57014 query_canceled, 40001 serialization_failure,
//	40P01 deadlock_detected,
//	25P03 idle_in_transaction_session_timeout unavailable
//	class 22 data exception, 23 integrity     data
//	anything at severity PANIC                unavailable (and disk full
//	                                          for 53100): the cluster
//	                                          restarts
//
// Connection failures, network errors and timeouts without a SQLSTATE are
// unavailable too.
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

// Classify says what err means (see Class); nil and errors that do not
// come from Postgres or the driver are ClassOther.
func Classify(err error) Class {
	if err == nil {
		return ClassOther
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return classifyCode(pgErr)
	}
	var connErr *pgconn.ConnectError
	var netErr net.Error
	if errors.As(err, &connErr) || errors.As(err, &netErr) || pgconn.Timeout(err) {
		return ClassUnavailable
	}
	return ClassOther
}

func classifyCode(e *pgconn.PgError) Class {
	code := e.Code
	switch {
	case code == diskFull:
		return ClassDiskFull
	case panicked(e):
		return ClassUnavailable
	}
	switch code {
	case adminShutdown, crashShutdown, cannotConnectNow, queryCanceled,
		serializationFailure, deadlockDetected, idleSessionTimeout, idleInTransactionAbort:
		return ClassUnavailable
	}
	switch code[:min(2, len(code))] {
	case classConnection, classInsufficientRes:
		return ClassUnavailable
	case "22", "23":
		return ClassData
	}
	return ClassOther
}

// panicked reports whether the server process that answered e panicked:
// the postmaster then ends every session and restarts the cluster.
func panicked(e *pgconn.PgError) bool {
	sev := e.SeverityUnlocalized
	if sev == "" {
		sev = e.Severity
	}
	return sev == "PANIC"
}

// DiskFull reports whether Postgres could not write for lack of disk
// space (ClassDiskFull).
func DiskFull(err error) bool { return Classify(err) == ClassDiskFull }

// UniqueViolation reports whether a statement would have duplicated a
// unique key.
func UniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == uniqueViolation
}

// Conflict reports whether Postgres aborted the transaction for its
// clash with another (deadlock detected, serialization failure): nothing
// of it took effect, and running it again may succeed at once.
func Conflict(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == deadlockDetected || pgErr.Code == serializationFailure)
}

// Unavailable reports whether err means Postgres could not be reached or
// could not serve the statement now: connection failures, terminated
// backends, shutdowns, too many connections, timeouts (ClassUnavailable).
// A retry later may succeed; the request itself is not at fault. A PANIC
// is unavailable whatever its SQLSTATE, a full disk's included: the
// cluster restarts, and whatever the session was doing, a COMMIT too,
// may or may not have taken effect.
func Unavailable(err error) bool {
	if Classify(err) == ClassUnavailable {
		return true
	}
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && panicked(pgErr)
}

// DataError reports whether Postgres refused a statement for the data it
// carried (SQLSTATE class 22, data exception, or 23, integrity constraint
// violation): retrying the same statement fails again, and other
// statements are not at fault.
func DataError(err error) bool { return Classify(err) == ClassData }
