//go:build unix

// Package porthold keeps loopback ports taken for the test harnesses
// (redistest, etcdtest, sqltest): a port whose server is down must not be
// taken by another test's server, started on a "free" port, that would
// then answer the clients that expect a dead one.
package porthold

import "syscall"

// Hold keeps port on the loopback address taken until release is called:
// a socket bound without SO_REUSEADDR (when bind checks it) and not
// listening. No server can bind beside it, the kernel does not hand it out
// for port 0, and a connection to it is refused, as to a dead server. If
// the port is taken already, Hold holds nothing.
func Hold(port int) (release func()) {
	fd, err := socket()
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

// Closed returns a loopback port, chosen by the kernel, that refuses every
// connection and that no server can take until release is called: a
// socket bound to it that does not listen.
func Closed() (port int, release func(), err error) {
	fd, err := socket()
	if err != nil {
		return 0, nil, err
	}
	release = func() { syscall.Close(fd) }
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		release()
		return 0, nil, err
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		release()
		return 0, nil, err
	}
	return sa.(*syscall.SockaddrInet4).Port, release, nil
}

// socket makes a TCP socket, close-on-exec, set under ForkLock as package
// net does: a server started meanwhile must not inherit it, and keep the
// port.
func socket() (int, error) {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fd)
	}
	return fd, err
}
