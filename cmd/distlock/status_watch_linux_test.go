//go:build linux

package main

import (
	"testing"

	"github.com/distlock/distlock/redistest"
)

// TestStatusWatchTerminal runs status --watch in a pseudo-terminal, from
// an interactive bash: it redraws the state in place (cursor home, lines
// and the rest of the screen cleared), shows the lock free, then locked
// once the test takes it, and ^C ends it with status 0.
func TestStatusWatchTerminal(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	sh := startShell(t, t.TempDir())
	sh.send(binary + " status --redis " + srv.URL() + " --watch --interval 100ms watched\n")
	sh.expect(t, "\x1b[HEvery 100ms: distlock status watched  ")
	sh.expect(t, "state:      free\x1b[K")
	sh.expect(t, "\x1b[J")
	hold(t, c, "watched")
	sh.expect(t, "\x1b[HEvery 100ms: distlock status watched  ")
	sh.expect(t, "state:      locked\x1b[K")
	sh.send("\x03") // ^C
	sh.expect(t, "$ ")
	sh.send("echo status=$?\n")
	sh.expect(t, "status=0")
}
