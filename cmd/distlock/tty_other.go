//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd)

package main

// isTerminal reports whether the file descriptor fd is a terminal. On
// this platform distlock does not know, and says no: it then prints plain
// progress lines.
func isTerminal(fd int) bool { return false }

// A terminal is distlock's controlling terminal. On this platform
// distlock does not manage one: openTerminal returns nil, and the methods
// of a nil *terminal do nothing.
type terminal struct{ fd int }

func openTerminal() *terminal          { return nil }
func (t *terminal) inForeground() bool { return false }
func (t *terminal) started()           {}
func (t *terminal) handOver(pgid int)  {}
func (t *terminal) takeBack(pgid int)  {}
func (t *terminal) close()             {}
