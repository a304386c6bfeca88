//go:build unix && !linux

package main

import (
	"os"
	"syscall"
)

// setParentDeath does nothing: only Linux can kill the command when
// distlock dies.
func setParentDeath(attr *syscall.SysProcAttr) {}

// awaitExit cannot wait for p without reaping it on this platform; it
// reports false, and the job is marked exited once reaped.
func awaitExit(p *os.Process) bool { return false }
