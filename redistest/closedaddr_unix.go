//go:build unix

package redistest

import (
	"fmt"
	"syscall"
)

// ClosedAddr returns a loopback address, host:port, that refuses every
// connection until the test ends: a socket of the test's is bound to it and
// does not listen, so no server (another test's, started on a "free" port
// meanwhile) can take the port and answer a client that expects nobody
// there. For tests of an unreachable server.
func ClosedAddr(tb TB) string {
	tb.Helper()
	syscall.ForkLock.RLock() // a process started meanwhile must not inherit it
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fd)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		tb.Fatal("redistest: a socket for a closed address: ", err)
	}
	tb.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		tb.Fatal("redistest: binding a closed address: ", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		tb.Fatal("redistest: the port of a closed address: ", err)
	}
	return fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}
