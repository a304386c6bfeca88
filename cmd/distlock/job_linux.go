package main

import (
	"errors"
	"os"
	"syscall"
	"unsafe"
)

// setParentDeath has the kernel send SIGKILL to the command if distlock
// dies (for example killed with SIGKILL, or by the OOM killer): the lock is
// then no longer renewed, so the command must not go on without it. Only
// the command's own process is killed this way; what it started goes on
// unless it reacts to its parent's death.
//
// The kernel sends the signal when the thread that started the command
// exits; Go ends threads only after runtime.LockOSThread, which distlock
// does not use.
func setParentDeath(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}

// awaitExit returns once p has exited, without reaping it, so that its
// process id stays reserved until job.wait has marked the job exited. It
// reports whether it could wait.
func awaitExit(p *os.Process) bool {
	const pPID = 1 // P_PID
	var siginfo [128]byte
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(p.Pid),
			uintptr(unsafe.Pointer(&siginfo[0])), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		if !errors.Is(errno, syscall.EINTR) {
			return errno == 0
		}
	}
}
