//go:build unix && !linux

package sqltest

import (
	"os"
	"syscall"
)

// sysProcAttr puts a server in its own process group, so that signals sent
// to the test's process group (such as ^C) do not reach it directly, and
// runs it as the account as when that is not nil. Unlike on Linux, the
// server is not killed automatically if the test binary dies.
func sysProcAttr(as *account) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Credential: as.credential()}
}

var (
	sigInt  os.Signal = syscall.SIGINT
	sigTerm os.Signal = syscall.SIGTERM
	sigStop os.Signal = syscall.SIGSTOP
	sigCont os.Signal = syscall.SIGCONT
)
