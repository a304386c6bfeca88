//go:build unix

package etcdtest

import "syscall"

// holdPort keeps port on the loopback address taken while a member is
// down, so that no other server (another test's, started on a "free" port)
// takes it and answers the clients and peers that expect a dead member: a
// socket bound without SO_REUSEADDR (when bind checks it) and not
// listening. Nothing can listen beside it, the kernel does not hand it out
// for port 0, and a connection to it is refused, as to a dead member.
// release gives the port back. (Copied from redistest.)
func holdPort(port int) (release func()) {
	// Close-on-exec, set under ForkLock as package net does: a process
	// started meanwhile must not inherit the socket, and keep the port.
	syscall.ForkLock.RLock()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fd)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return func() {}
	}
	// The dead member's connections linger in TIME_WAIT on the port: bind
	// with SO_REUSEADDR, then clear it, since a socket bound without it is
	// what another bind cannot join.
	addr := &syscall.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}
	if syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1) != nil ||
		syscall.Bind(fd, addr) != nil ||
		syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 0) != nil {
		syscall.Close(fd) // taken already: nothing to hold
		return func() {}
	}
	return func() { syscall.Close(fd) }
}
