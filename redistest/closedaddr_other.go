//go:build !unix

package redistest

import "net"

// ClosedAddr returns a loopback address, host:port, that refused
// connections when it returned: on this platform, another server may take
// its port later.
func ClosedAddr(tb TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal("redistest: a closed address: ", err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
