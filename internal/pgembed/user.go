package pgembed

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// runAs is the identity postgres runs under: nil fields mean "as ourselves".
type runAs struct {
	name     string
	uid, gid uint32
}

// unprivilegedUser returns nil when we are not root. As root it picks the
// postgres account, else nobody: postgres refuses to run as root.
func unprivilegedUser() (*runAs, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		return &runAs{name: name, uid: uint32(uid), gid: uint32(gid)}, nil
	}
	return nil, fmt.Errorf("embedded postgres: running as root and no unprivileged user (postgres or nobody) exists to run postgres as; create one or set CARDBOX_DATABASE_URL")
}

func (u *runAs) sysProcAttr() *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: true}
	if u != nil {
		attr.Credential = &syscall.Credential{Uid: u.uid, Gid: u.gid}
	}
	return attr
}

// own hands dir (not recursively: initdb creates what is inside) to the
// postgres user.
func (u *runAs) own(dir string) error {
	if u == nil {
		return nil
	}
	if err := os.Chown(dir, int(u.uid), int(u.gid)); err != nil {
		return fmt.Errorf("embedded postgres: chown %s to %s: %w", dir, u.name, err)
	}
	return nil
}

// checkTraversable makes sure the postgres user can reach dir: every parent
// must be searchable by others, since that user is neither owner nor group.
func (u *runAs) checkTraversable(dir string) error {
	if u == nil {
		return nil
	}
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("embedded postgres: %w", err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("embedded postgres: postgres runs as user %q, which cannot enter %s (mode %v); "+
				"choose a data directory whose parents are world-searchable (chmod o+x), or run as a non-root user",
				u.name, d, fi.Mode().Perm())
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}
