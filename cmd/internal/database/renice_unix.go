//go:build unix

package database

import "syscall"

// renice sets the nice value of process pid.
func renice(pid, nice int) error {
	return syscall.Setpriority(syscall.PRIO_PROCESS, pid, nice)
}
