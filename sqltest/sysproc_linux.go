//go:build linux

package sqltest

import (
	"os"
	"syscall"
)

// sysProcAttr puts a server in its own process group, so that signals sent
// to the test's process group (such as ^C) do not reach it directly, runs
// it as the account as when that is not nil, and asks the kernel to
// SIGKILL it when the thread that started it exits, so that a crashed or
// killed test binary does not leave servers behind. (The kernel clears
// the parent-death signal on a change of credentials; Go sets it after
// switching to as, so it holds.) A postmaster killed so ends its backends
// too: they notice its death and exit.
//
// The kernel sends the parent-death signal when the OS thread that forked
// the server exits, not only when the whole process does. Go only ends a
// thread when a goroutine locked to it with runtime.LockOSThread returns
// without unlocking, so servers must not be started from such goroutines.
func sysProcAttr(as *account) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: as.credential()}
}

var (
	sigInt  os.Signal = syscall.SIGINT
	sigTerm os.Signal = syscall.SIGTERM
	sigStop os.Signal = syscall.SIGSTOP
	sigCont os.Signal = syscall.SIGCONT
)
