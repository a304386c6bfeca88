//go:build linux

package sqltest

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// procInfo is what /proc/PID/stat says of a process: enough to find a
// server's children and to tell whether a pid still names the same
// process (its start time does not change).
type procInfo struct {
	pid   int
	ppid  int
	state byte   // R, S, D, T (stopped), t, Z (zombie), X, ...
	start uint64 // start time, in clock ticks after boot
}

// haveProcfs reports whether readStat and children work on this platform.
const haveProcfs = true

// readStat reads /proc/PID/stat.
func readStat(pid int) (procInfo, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, err
	}
	// "PID (COMM) STATE PPID ..." where COMM may hold spaces and parens:
	// the fields start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procInfo{}, fmt.Errorf("/proc/%d/stat: no ')'", pid)
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state), so field n is f[n-3]: ppid is 4,
	// starttime 22.
	if len(f) < 20 || len(f[0]) != 1 {
		return procInfo{}, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	ppid, err := strconv.Atoi(string(f[1]))
	if err != nil {
		return procInfo{}, fmt.Errorf("/proc/%d/stat: ppid: %w", pid, err)
	}
	start, err := strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil {
		return procInfo{}, fmt.Errorf("/proc/%d/stat: starttime: %w", pid, err)
	}
	return procInfo{pid: pid, ppid: ppid, state: f[0][0], start: start}, nil
}

// children returns the processes whose parent is pid. PostgreSQL's
// backends and auxiliary processes are children of the postmaster, each in
// a session of its own (they call setsid), so signalling the postmaster's
// process group does not reach them: they are found here instead.
func children(pid int) ([]procInfo, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	var kids []procInfo
	for _, name := range names {
		n, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		pi, err := readStat(n)
		if err != nil {
			continue // exited meanwhile
		}
		if pi.ppid == pid {
			kids = append(kids, pi)
		}
	}
	return kids, nil
}
