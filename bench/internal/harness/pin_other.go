//go:build !linux

package harness

import "errors"

// Pin is not supported off Linux.
func Pin(pid int, cpus []int) error { return errors.New("CPU pinning needs Linux") }

// PinSupported reports whether Pin works here.
const PinSupported = false
