//go:build !unix

package main

import (
	"os"
	"syscall"
)

// On this platform only an interrupt is caught, and the command is killed
// rather than asked to stop.
var (
	interruptSignals           = []os.Signal{os.Interrupt}
	forwardedSignals           = interruptSignals
	terminateSignal  os.Signal = os.Kill
)

const terminateName = "kill"

func sysProcAttr(ownGroup bool) *syscall.SysProcAttr { return nil }

func (j *job) forwards(sig os.Signal) bool { return sig != os.Interrupt }

func signalJob(j *job, sig os.Signal) { _ = j.cmd.Process.Signal(sig) }

func (j *job) kill() { j.signal(os.Kill) }

func awaitExit(p *os.Process) bool { return false }

func signalName(sig os.Signal) string {
	if sig == os.Interrupt {
		return "an interrupt"
	}
	return sig.String()
}

func signalNumber(sig os.Signal) (int, bool) {
	if sig == os.Interrupt {
		return 2, true
	}
	return 0, false
}

func killedBy(st *os.ProcessState) (int, bool) { return 0, false }
