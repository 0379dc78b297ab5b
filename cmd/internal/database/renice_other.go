//go:build !unix

package database

// renice does nothing where processes have no nice value.
func renice(pid, nice int) error { return nil }
