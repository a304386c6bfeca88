//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package main

import (
	"os"
	"os/signal"
	"syscall"
	"unsafe"
)

// isTerminal reports whether the file descriptor fd is a terminal.
func isTerminal(fd int) bool {
	var t syscall.Termios
	return ioctl(fd, ioctlGetTermios, unsafe.Pointer(&t)) == nil
}

// A terminal is distlock's controlling terminal, through which run hands
// its foreground to the command and back, as a shell does with its jobs.
// A nil *terminal is no terminal: its methods do nothing.
type terminal struct {
	f  *os.File
	fd int
}

// openTerminal opens distlock's controlling terminal, or returns nil if
// it has none.
func openTerminal() *terminal {
	f, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return nil
	}
	return &terminal{f: f, fd: int(f.Fd())}
}

// foreground returns the terminal's foreground process group, or 0.
func (t *terminal) foreground() int {
	var pgrp int32
	if ioctl(t.fd, syscall.TIOCGPGRP, unsafe.Pointer(&pgrp)) != nil {
		return 0
	}
	return int(pgrp)
}

// inForeground reports whether distlock's process group has the
// terminal's foreground.
func (t *terminal) inForeground() bool {
	return t != nil && t.foreground() == syscall.Getpgrp()
}

// started is called once the command has started: from then on distlock
// ignores SIGTTOU, so that neither its messages (with "stty tostop") nor
// handing the foreground back from the background stop it, which would
// stop its renewals while the command runs. The command has its own
// disposition already.
func (t *terminal) started() {
	if t != nil {
		signal.Ignore(syscall.SIGTTOU)
	}
}

// handOver gives the terminal's foreground to the process group pgid if
// distlock's own group has it: distlock was brought to the foreground
// (fg), and the command must be too.
func (t *terminal) handOver(pgid int) {
	if t.inForeground() {
		_ = ioctl(t.fd, syscall.TIOCSPGRP, unsafe.Pointer(&[]int32{int32(pgid)}[0]))
	}
}

// takeBack gives the terminal's foreground back to distlock's process
// group if the group pgid, the command's, has it.
func (t *terminal) takeBack(pgid int) {
	if t != nil && t.foreground() == pgid {
		_ = ioctl(t.fd, syscall.TIOCSPGRP, unsafe.Pointer(&[]int32{int32(syscall.Getpgrp())}[0]))
	}
}

// close closes the terminal.
func (t *terminal) close() {
	if t != nil {
		_ = t.f.Close()
	}
}

func ioctl(fd int, req uintptr, arg unsafe.Pointer) error {
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), req, uintptr(arg))
	if errno != 0 {
		return errno
	}
	return nil
}
