package pgembed

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// defaultPort names the socket (.s.PGSQL.5432) when there is no TCP
// listener. Postgres uses one port for its socket and for TCP, so a TCP
// listener renames the socket; the socket directory is private to the
// cluster, so nothing else depends on the name.
const defaultPort = 5432

// ErrNotLoopback is a TCP listen address beyond this machine.
var ErrNotLoopback = errors.New("the embedded Postgres listens on TCP on a loopback IP address only " +
	"(such as 127.0.0.1:5433 or [::1]:5433)")

// listener is where postgres listens: its port (the socket's name, and the
// TCP port) and the TCP address, empty for the socket only.
type listener struct {
	host string
	port int
}

// addr is the TCP address, or "" for the socket only.
func (l listener) addr() string {
	if l.host == "" {
		return ""
	}
	return net.JoinHostPort(l.host, strconv.Itoa(l.port))
}

// parseListener checks a TCP listen address ("" for none): an IP literal
// that is a loopback address, and a port.
func parseListener(addr string) (listener, error) {
	if addr == "" {
		return listener{port: defaultPort}, nil
	}
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return listener{}, fmt.Errorf("embedded postgres: TCP address %q: %w", addr, err)
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return listener{}, fmt.Errorf("embedded postgres: TCP address %q: %w", addr, ErrNotLoopback)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 1 || port > 65535 {
		return listener{}, fmt.Errorf("embedded postgres: TCP address %q: the port must be 1 to 65535", addr)
	}
	return listener{host: ip.String(), port: port}, nil
}

// hbaConf is the cluster's pg_hba.conf, written at every start so that a
// cluster made by an earlier version (initdb --auth=trust) gets it too.
const hbaConf = `# Written by cardbox at every start of the embedded cluster: edits are lost.
# The unix socket, in a directory private to the cluster, trusts local
# roles: cardbox connects there. TCP (when enabled, on a loopback address
# only) wants a password (SCRAM) from every role. Nothing else is accepted.
local all all trust
host  all all 127.0.0.0/8 scram-sha-256
host  all all ::1/128     scram-sha-256
`

// writeHBA writes pg_hba.conf unless it holds hbaConf already; it reports
// whether it changed the file.
func (s *Server) writeHBA() (bool, error) {
	path := filepath.Join(s.dataDir(), "pg_hba.conf")
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, []byte(hbaConf)) {
		return false, nil
	}
	tmp := path + ".cardbox-tmp"
	if err := os.WriteFile(tmp, []byte(hbaConf), 0o600); err != nil {
		return false, fmt.Errorf("embedded postgres: write pg_hba.conf: %w", err)
	}
	if err := s.user.own(tmp); err != nil {
		os.Remove(tmp)
		return false, err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return false, fmt.Errorf("embedded postgres: write pg_hba.conf: %w", err)
	}
	return true, nil
}

// recordedListener reads the port and the first listen address of the
// postmaster that wrote postmaster.pid (its lines 4 and 6), which may
// still be running.
func (s *Server) recordedListener() (listener, bool) {
	b, err := os.ReadFile(filepath.Join(s.dataDir(), "postmaster.pid"))
	if err != nil {
		return listener{}, false
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 6 {
		return listener{}, false
	}
	port, err := strconv.Atoi(strings.TrimSpace(lines[3]))
	if err != nil {
		return listener{}, false
	}
	return listener{host: strings.TrimSpace(lines[5]), port: port}, true
}
