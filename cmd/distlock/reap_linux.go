package main

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"
	"unsafe"
)

// becomeReaper makes distlock a child subreaper (PR_SET_CHILD_SUBREAPER):
// a process of the job whose parent exits becomes distlock's child instead
// of init's, wherever it is in the tree, even after setsid. So the job's
// processes are all distlock's descendants until they exit, and
// distlock's last child exiting means the whole job has.
func becomeReaper() error {
	const prSetChildSubreaper = 36
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		return errno
	}
	return nil
}

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

// reap reaps distlock's children, the command and every orphan of the job
// handed to distlock, until none is left; it records the command's
// status and reports its stops, then closes j.done.
//
// It waits without reaping, then reaps under j.mu: a child's process id
// stays reserved until then, so signalAll, which holds j.mu, never
// signals a process that reused it.
func (j *job) reap() {
	for awaitChild() == nil {
		j.mu.Lock()
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG|syscall.WUNTRACED|syscall.WCONTINUED, nil)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if err != nil || pid <= 0 {
				break
			}
			if pid == j.pid {
				j.record(ws)
			}
		}
		j.mu.Unlock()
	}
	close(j.done) // ECHILD: distlock has no child left
}

// awaitChild waits until one of distlock's children has changed state
// (exited, stopped or continued), without reaping it. It returns ECHILD
// once distlock has no children.
func awaitChild() error {
	const pAll = 0 // P_ALL
	var siginfo [128]byte
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pAll, 0, uintptr(unsafe.Pointer(&siginfo[0])),
			syscall.WEXITED|syscall.WSTOPPED|syscall.WCONTINUED|syscall.WNOWAIT, 0, 0)
		switch errno {
		case 0:
			return nil
		case syscall.EINTR:
			continue
		}
		return errno
	}
}

// signalAll sends sig once to every process of the job: to each living
// descendant of distlock, found in /proc, in rounds until a round finds
// none that was not signalled yet (a process forked meanwhile is found by
// the next round). Once, because a program may read a second SIGTERM as
// "quit now, skip the clean shutdown". j.mu is held, so distlock's
// children are not reaped meanwhile; a deeper descendant is reaped by its
// own parent, and could in theory be reaped and its id reused between the
// read of /proc and the signal. If /proc cannot be read, sig goes to the
// command's process group instead.
func (j *job) signalAll(sig syscall.Signal) {
	sent := make(map[int]bool)
	for range 8 {
		pids, err := descendants(os.Getpid())
		if err != nil {
			if len(sent) == 0 && j.ownGroup {
				_ = syscall.Kill(-j.pid, sig)
			}
			return
		}
		fresh := 0
		for _, pid := range pids {
			if !sent[pid] {
				sent[pid] = true
				fresh++
				_ = syscall.Kill(pid, sig)
			}
		}
		if fresh == 0 {
			return
		}
	}
}

// leftovers reports how many processes of the job still run (zombies
// not counted).
func (j *job) leftovers() int {
	pids, _ := descendants(os.Getpid())
	return len(pids)
}

// descendants returns the living (not zombie) descendants of the process
// root, read from /proc.
func descendants(root int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	children := make(map[int][]int)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, live := parentOf(pid); live {
			children[ppid] = append(children[ppid], pid)
		}
	}
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		out = append(out, children[p]...)
		queue = append(queue, children[p]...)
	}
	return out, nil
}

// othersInGroup reports whether processes other than distlock are in
// distlock's process group.
func othersInGroup() bool {
	self, pgrp := os.Getpid(), syscall.Getpgrp()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if g, ok := groupOf(pid); ok && g == pgrp {
			return true
		}
	}
	return false
}

// groupOf reads the process group of the process pid from /proc.
func groupOf(pid int) (int, bool) {
	fields := statFields(pid)
	if len(fields) < 3 {
		return 0, false
	}
	g, err := strconv.Atoi(string(fields[2]))
	return g, err == nil
}

// statFields returns the fields of /proc/PID/stat that follow the
// command name: STATE PPID PGRP ..., or nil.
func statFields(pid int) [][]byte {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	// "PID (COMM) STATE PPID ...": COMM may hold spaces and parentheses.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return nil
	}
	return bytes.Fields(stat[i+1:])
}

// parentOf reads the parent of the process pid from /proc/PID/stat, and
// whether the process is alive (not a zombie, not gone).
func parentOf(pid int) (ppid int, live bool) {
	fields := statFields(pid)
	if len(fields) < 2 || fields[0][0] == 'Z' || fields[0][0] == 'X' {
		return 0, false
	}
	ppid, err := strconv.Atoi(string(fields[1]))
	return ppid, err == nil
}

// stopped reports whether the command's process is stopped now.
func (j *job) stopped() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.reaped {
		return false
	}
	fields := statFields(j.pid)
	return len(fields) > 0 && (fields[0][0] == 'T' || fields[0][0] == 't')
}
