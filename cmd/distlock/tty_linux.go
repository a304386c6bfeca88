package main

import "syscall"

// ioctlGetTermios is the ioctl that reads a terminal's settings.
const ioctlGetTermios = syscall.TCGETS
