//go:build unix && !linux

package redistest

import (
	"os"
	"syscall"
)

// sysProcAttr puts the server in its own process group, so that signals sent
// to the test's process group (such as ^C) do not reach it directly. Unlike
// on Linux, the server is not killed automatically if the test binary dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

var (
	sigTerm os.Signal = syscall.SIGTERM
	sigStop os.Signal = syscall.SIGSTOP
	sigCont os.Signal = syscall.SIGCONT
)
