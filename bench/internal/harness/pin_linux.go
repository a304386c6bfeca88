package harness

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Pin sets the CPU affinity of every thread of process pid (0: this
// process) to cpus. Threads created later inherit it from their creator,
// and so do child processes.
func Pin(pid int, cpus []int) error {
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	proc := "self"
	if pid != 0 {
		proc = strconv.Itoa(pid)
	}
	tasks, err := os.ReadDir("/proc/" + proc + "/task")
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil {
			return fmt.Errorf("pin thread %d of %s: %w", tid, proc, err)
		}
	}
	return nil
}

// PinSupported reports whether Pin works here.
const PinSupported = true
