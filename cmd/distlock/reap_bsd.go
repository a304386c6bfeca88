//go:build unix && !linux

package main

import (
	"errors"
	"syscall"
	"time"
)

// becomeReaper does nothing: only Linux lets distlock adopt the processes
// that the command leaves behind. The job is then the command's process
// group (see job).
func becomeReaper() error { return nil }

// othersInGroup reports false: this platform does not tell which
// processes share distlock's group without more than it is worth, and
// distlock then gives the command a group of its own.
func othersInGroup() bool { return false }

// setParentDeath does nothing: only Linux can kill the command when
// distlock dies.
func setParentDeath(attr *syscall.SysProcAttr) {}

// groupPoll is how often reap looks whether the command's process group
// still has members once the command has exited.
const groupPoll = 100 * time.Millisecond

// reap waits for the command's process, records its status and reports
// its stops; once it has exited, it waits for its process group to be
// empty, then closes j.done. The command's process id may be reused
// between its reaping and the recording, when signalAll could signal
// the wrong process group: this platform cannot wait without reaping.
func (j *job) reap() {
	for {
		var ws syscall.WaitStatus
		_, err := syscall.Wait4(j.pid, &ws, syscall.WUNTRACED|syscall.WCONTINUED, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		j.mu.Lock()
		if err != nil { // cannot happen: the command is distlock's child
			j.record(syscall.WaitStatus(exitFailure << 8))
		} else {
			j.record(ws)
		}
		reaped := j.reaped
		j.mu.Unlock()
		if reaped {
			break
		}
	}
	for j.leftovers() > 0 {
		time.Sleep(groupPoll)
	}
	close(j.done)
}

// signalAll sends sig to the command's process group.
func (j *job) signalAll(sig syscall.Signal) { _ = syscall.Kill(j.target(), sig) }

// leftovers reports whether processes of the command's group still run:
// 1 if some do, else 0.
func (j *job) leftovers() int {
	if j.ownGroup && syscall.Kill(-j.pid, 0) == nil {
		return 1
	}
	return 0
}

// stopped reports whether the command's process may still be stopped:
// this platform does not tell without waiting, so it says yes until the
// command has exited.
func (j *job) stopped() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return !j.reaped
}
