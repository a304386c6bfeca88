package porthold

import (
	"fmt"
	"net"
	"testing"
)

// A held port and a closed one refuse connections, and no server can
// listen on them until they are released.
func TestHoldAndClosed(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held := l.Addr().(*net.TCPAddr).Port
	l.Close()
	release := Hold(held)
	closed, releaseClosed, err := Closed()
	if err != nil {
		t.Fatal(err)
	}
	for _, port := range []int{held, closed} {
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			t.Errorf("a connection to %s was accepted", addr)
		}
		if l, err := net.Listen("tcp", addr); err == nil {
			l.Close()
			t.Errorf("a server could listen on %s", addr)
		}
	}
	release()
	releaseClosed()
	l, err = net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", held))
	if err != nil {
		t.Fatalf("the released port: %v", err)
	}
	l.Close()
}
