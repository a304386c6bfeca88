package redistest

import (
	"fmt"

	"github.com/distlock/distlock/internal/porthold"
)

// ClosedAddr returns a loopback address, host:port, that refuses every
// connection until the test ends: a socket of the test's is bound to it and
// does not listen, so no server (another test's, started on a "free" port
// meanwhile) can take the port and answer a client that expects nobody
// there. For tests of an unreachable server. (On platforms other than
// Unix, another server may take the port later.)
func ClosedAddr(tb TB) string {
	tb.Helper()
	port, release, err := porthold.Closed()
	if err != nil {
		tb.Fatal("redistest: a closed address: ", err)
	}
	tb.Cleanup(release)
	return fmt.Sprintf("127.0.0.1:%d", port)
}
