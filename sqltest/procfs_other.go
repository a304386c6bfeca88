//go:build !linux

package sqltest

import "errors"

// procInfo is what /proc/PID/stat says of a process on Linux; there is no
// such file here.
type procInfo struct {
	pid   int
	ppid  int
	state byte
	start uint64
}

// haveProcfs reports whether readStat and children work on this platform.
const haveProcfs = false

func readStat(int) (procInfo, error) { return procInfo{}, errors.ErrUnsupported }

// children finds nothing on this platform: PostgreSQL's backends are then
// neither paused nor killed with their postmaster, and end by themselves
// when they notice that it died.
func children(int) ([]procInfo, error) { return nil, nil }
