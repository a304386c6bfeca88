package harness

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// CommandStats maps a command name (as in INFO commandstats, e.g. "evalsha",
// "client|setinfo") to its call count. Redis counts the commands that Lua
// scripts run too.
type CommandStats map[string]int64

// ReadCommandStats reads INFO commandstats.
func ReadCommandStats(ctx context.Context, rdb *redis.Client) (CommandStats, error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	return parseCommandStats(info), nil
}

// ReadCommandUsec reads the microseconds Redis spent executing each
// command (INFO commandstats usec); a script's time includes the commands
// it runs, which are also counted under their own names.
func ReadCommandUsec(ctx context.Context, rdb *redis.Client) (CommandStats, error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	return parseCommandField(info, "usec="), nil
}

func parseCommandStats(info string) CommandStats { return parseCommandField(info, "calls=") }

func parseCommandField(info, field string) CommandStats {
	cs := CommandStats{}
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		rest, ok := strings.CutPrefix(line, "cmdstat_")
		if !ok {
			continue
		}
		name, fields, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		for _, f := range strings.Split(fields, ",") {
			if v, ok := strings.CutPrefix(f, field); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				cs[name] = n
			}
		}
	}
	return cs
}

// harnessCommand reports commands the harness itself or connection set-up
// sends, which are not the cost of a lock operation.
func harnessCommand(name string) bool {
	base, _, _ := strings.Cut(name, "|")
	switch base {
	case "info", "hello", "client", "ping", "flushall", "config", "select", "command", "monitor":
		return true
	}
	return false
}

// Delta is after - before, without harness commands.
func (after CommandStats) Delta(before CommandStats) CommandStats {
	d := CommandStats{}
	for k, v := range after {
		if harnessCommand(k) {
			continue
		}
		if n := v - before[k]; n != 0 {
			d[k] = n
		}
	}
	return d
}

// Total is the sum of all calls.
func (cs CommandStats) Total() int64 {
	var t int64
	for _, v := range cs {
		t += v
	}
	return t
}

// ServerCPU reads the server's used CPU (user + system) from INFO cpu.
func ServerCPU(ctx context.Context, rdb *redis.Client) (time.Duration, error) {
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		for _, k := range []string{"used_cpu_sys:", "used_cpu_user:"} {
			if v, ok := strings.CutPrefix(line, k); ok {
				f, _ := strconv.ParseFloat(v, 64)
				total += f
			}
		}
	}
	return time.Duration(total * float64(time.Second)), nil
}

// PubSubClients counts the connections named name (CLIENT SETNAME) that
// are in pub/sub mode.
func PubSubClients(ctx context.Context, rdb *redis.Client, name string) (int, error) {
	s, err := rdb.ClientList(ctx).Result()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, line := range strings.Split(s, "\n") {
		// A connection in pub/sub mode has the P flag (RESP2) or
		// subscriptions (RESP3 clients are not flagged P).
		if line == "" || !strings.Contains(line, " name="+name+" ") {
			continue
		}
		if strings.Contains(line, " flags=P") || fieldPositive(line, "sub=") || fieldPositive(line, "psub=") || fieldPositive(line, "ssub=") {
			n++
		}
	}
	return n, nil
}

func fieldPositive(line, key string) bool {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, key); ok {
			n, _ := strconv.Atoi(v)
			return n > 0
		}
	}
	return false
}

// A Monitor counts the commands a Redis server executes, through MONITOR,
// telling the ones clients send from the ones Lua scripts run. MONITOR
// slows the server down, so it is only used in counting passes that are
// not timed.
type Monitor struct {
	conn     net.Conn
	done     chan struct{}
	top      atomic.Int64 // commands sent by clients
	inScript atomic.Int64 // commands run by scripts
	mu       sync.Mutex
	byName   map[string]int64
}

// StartMonitor connects to addr and starts counting.
func StartMonitor(addr string) (*Monitor, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		conn.Close()
		return nil, err
	}
	r := bufio.NewReaderSize(conn, 1<<16)
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "+OK") {
		conn.Close()
		return nil, fmt.Errorf("MONITOR: %q %v", line, err)
	}
	conn.SetReadDeadline(time.Time{})
	m := &Monitor{conn: conn, done: make(chan struct{}), byName: map[string]int64{}}
	go m.read(r)
	return m, nil
}

// A MONITOR line: +1700000000.123456 [0 127.0.0.1:5555] "SET" "k" ...
// or [0 lua] for a command run by a script.
func (m *Monitor) read(r *bufio.Reader) {
	defer close(m.done)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		open := strings.IndexByte(line, '[')
		end := strings.IndexByte(line, ']')
		if open < 0 || end < open {
			continue
		}
		src := line[open+1 : end]
		rest := strings.TrimSpace(line[end+1:])
		name := strings.ToLower(strings.Trim(strings.SplitN(rest, " ", 2)[0], `"`))
		if harnessCommand(name) {
			continue
		}
		if strings.HasSuffix(src, " lua") {
			m.inScript.Add(1)
		} else {
			m.top.Add(1)
		}
		m.mu.Lock()
		m.byName[name]++
		m.mu.Unlock()
	}
}

// Counts returns the commands counted so far: sent by clients, and run by
// scripts.
func (m *Monitor) Counts() (top, inScript int64) { return m.top.Load(), m.inScript.Load() }

// Stop ends monitoring; a short pause first lets the last lines arrive.
func (m *Monitor) Stop() {
	time.Sleep(50 * time.Millisecond)
	m.conn.Close()
	<-m.done
}

// A CountingHook counts the round trips of a go-redis client: one per
// command sent alone, one per pipeline.
type CountingHook struct {
	Singles   atomic.Int64
	Pipelines atomic.Int64
	Commands  atomic.Int64
}

var _ redis.Hook = (*CountingHook)(nil)

func (h *CountingHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *CountingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.Singles.Add(1)
		h.Commands.Add(1)
		return next(ctx, cmd)
	}
}

func (h *CountingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.Pipelines.Add(1)
		h.Commands.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// RoundTrips is singles + pipelines.
func (h *CountingHook) RoundTrips() int64 { return h.Singles.Load() + h.Pipelines.Load() }
