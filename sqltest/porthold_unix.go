//go:build unix

package sqltest

import "syscall"

// holdPort keeps port on the loopback address taken while a server is
// down (killed or shut down), so that no other server (another test's,
// started on a "free" port) takes it and answers the clients that expect
// a dead server: a socket bound without SO_REUSEADDR (when bind checks
// it) and not listening. A server cannot bind beside it, the kernel does
// not hand it out for port 0, and a connection to it is refused, as to a
// dead server. release gives the port back. (Copied from redistest.)
func holdPort(port int) (release func()) {
	// Close-on-exec, set under ForkLock as package net does: a server
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
	// The dead server's connections linger in TIME_WAIT on the port: bind
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
