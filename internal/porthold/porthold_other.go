//go:build !unix

// Package porthold keeps loopback ports taken for the test harnesses; on
// this platform it cannot: the port of a stopped server may be taken by
// another.
package porthold

import "net"

// Hold holds nothing on this platform.
func Hold(int) (release func()) { return func() {} }

// Closed returns a loopback port that refused connections when it
// returned; another server may take it later.
func Closed() (port int, release func(), err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, nil, err
	}
	port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port, func() {}, nil
}
