package harness

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// machineCPU returns the CPU time the whole machine has spent busy (user,
// nice, system, irq, softirq, all CPUs) and stolen by the hypervisor since
// boot, from /proc/stat (Linux; ok false elsewhere). The figures move in
// ticks of 10 ms (USER_HZ 100).
func machineCPU() (busy, steal time.Duration, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, false
	}
	n := make([]int64, 8)
	for i := range n {
		n[i], err = strconv.ParseInt(f[i+1], 10, 64)
		if err != nil {
			return 0, 0, false
		}
	}
	const tick = 10 * time.Millisecond
	// user nice system idle iowait irq softirq steal
	busy = time.Duration(n[0]+n[1]+n[2]+n[5]+n[6]) * tick
	return busy, time.Duration(n[7]) * tick, true
}
