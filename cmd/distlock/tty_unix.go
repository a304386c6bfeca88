//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package main

import (
	"os"
	"syscall"
	"unsafe"
)

// isTerminal reports whether the file descriptor fd is a terminal.
func isTerminal(fd int) bool {
	var t syscall.Termios
	return ioctl(fd, ioctlGetTermios, unsafe.Pointer(&t)) == nil
}

// inForeground reports whether distlock runs in the foreground of its
// controlling terminal, if it has one: whether the terminal's foreground
// process group is distlock's own. Signals typed at the terminal (^C, ^\,
// ^Z) then reach distlock's whole process group.
func inForeground() bool {
	tty, err := os.Open("/dev/tty") // fails without a controlling terminal
	if err != nil {
		return false
	}
	defer tty.Close()
	conn, err := tty.SyscallConn()
	if err != nil {
		return false
	}
	var pgrp int32
	var ierr error
	if err := conn.Control(func(fd uintptr) {
		ierr = ioctl(int(fd), syscall.TIOCGPGRP, unsafe.Pointer(&pgrp))
	}); err != nil || ierr != nil {
		return false
	}
	return int(pgrp) == syscall.Getpgrp()
}

func ioctl(fd int, req uintptr, arg unsafe.Pointer) error {
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), req, uintptr(arg))
	if errno != 0 {
		return errno
	}
	return nil
}
