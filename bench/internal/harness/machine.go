package harness

import (
	"os"
	"runtime"
	"strings"
)

// LoadAvg is the machine's load average over 1, 5 and 15 minutes, as
// /proc/loadavg has it ("?" where it cannot be read).
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// CPUModel is the first "model name" of /proc/cpuinfo ("?" where there is
// none).
func CPUModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
		}
	}
	return "?"
}

// PinApart keeps the last CPU for a server: it pins this process to the
// other CPUs and sets GOMAXPROCS to their number, and returns the server's
// CPU and the client's. Where pinning is not supported or there are fewer
// than 2 CPUs it does nothing and returns nil CPUs.
func PinApart() (server, client []int, err error) {
	n := runtime.NumCPU()
	if !PinSupported || n < 2 {
		return nil, nil, nil
	}
	for c := range n - 1 {
		client = append(client, c)
	}
	if err := Pin(0, client); err != nil {
		return nil, nil, err
	}
	runtime.GOMAXPROCS(len(client))
	return []int{n - 1}, client, nil
}
