//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd)

package main

// isTerminal reports whether the file descriptor fd is a terminal. On
// this platform distlock does not know, and says no: it then prints plain
// progress lines.
func isTerminal(fd int) bool { return false }

// inForeground reports whether distlock runs in the foreground of a
// terminal. On this platform distlock does not know, and says no.
func inForeground() bool { return false }
