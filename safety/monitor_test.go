package safety

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The monitor follows the lock server's MONITOR feed, which lists every
// command with the server's wall-clock time in microseconds, including the
// commands run inside scripts ("[0 lua]" lines). From it, it rebuilds each
// tenure of each lock on the server: the HSET of the acquire script that
// wrote owner and token, every PEXPIRE while that owner held it, and the DEL
// that ended it. The end of a tenure on the server is its DEL, or else the
// start of the script of its last PEXPIRE plus the lease: the earliest
// moment at which the server can have expired the key. It is the reference
// the loss signal of the holder must precede.
type monitor struct {
	addr   string
	prefix string

	mu       sync.Mutex
	tenures  map[tenureKey]*tenure
	current  map[string]*tenure // by key: the latest tenure
	lines    int
	connects int
	err      error
}

type tenureKey struct {
	key   string
	token uint64
}

// A tenure is one acquisition as the server saw it. Times are CLOCK_REALTIME
// ns, from the server's µs timestamps.
type tenure struct {
	Start    int64
	ExpBase  int64 // start of the script of the last PEXPIRE
	ExpMs    int64
	DelAt    int64 // 0 if not deleted
	Cut      bool  // the feed broke (server killed) while it was open
	Renewals int
	Owner    string // from the HSET
	PID      int    // from the HSET: the holder's process
	DelOwner string // owner argument of the script that deleted it
	DelHold  string // hold argument of that script ("0": every hold)
}

// end is when the tenure ended on the server at the earliest.
func (t *tenure) end() int64 {
	exp := t.ExpBase + t.ExpMs*int64(time.Millisecond)
	if t.DelAt != 0 && t.DelAt < exp {
		return t.DelAt
	}
	return exp
}

func newMonitor(addr, prefix string) *monitor {
	return &monitor{addr: addr, prefix: prefix, tenures: map[tenureKey]*tenure{}, current: map[string]*tenure{}}
}

// run follows the feed until ctx ends, reconnecting after the server was
// killed or restarted.
func (m *monitor) run(ctx context.Context, ready chan<- struct{}) {
	first := true
	for ctx.Err() == nil {
		err := m.follow(ctx, func() {
			if first {
				first = false
				close(ready)
			}
		})
		m.mu.Lock()
		for _, t := range m.current {
			if t.DelAt == 0 {
				t.Cut = true
			}
		}
		m.current = map[string]*tenure{}
		if err != nil && ctx.Err() == nil && !isConnErr(err) {
			m.err = err
		}
		m.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond): // the server is restarting: retry the dial
		}
	}
}

func isConnErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "EOF") ||
		strings.Contains(err.Error(), "connection reset")
}

func (m *monitor) follow(ctx context.Context, connected func()) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", m.addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		return err
	}
	r := bufio.NewReaderSize(conn, 1<<16)
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+OK") {
		return errors.New("MONITOR: " + strings.TrimSpace(line))
	}
	m.mu.Lock()
	m.connects++
	m.mu.Unlock()
	connected()
	var top topCommand
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		m.handle(strings.TrimRight(line, "\r\n"), &top)
	}
}

// topCommand is the last command a client sent: the script the following
// "[0 lua]" lines belong to.
type topCommand struct {
	ts   int64
	args []string
}

// handle parses one feed line: +1700000000.123456 [0 lua] "PEXPIRE" "k" "500".
func (m *monitor) handle(line string, top *topCommand) {
	if len(line) < 2 || line[0] != '+' {
		return
	}
	sp := strings.IndexByte(line, ' ')
	if sp < 0 {
		return
	}
	ts, ok := parseMicros(line[1:sp])
	if !ok {
		return
	}
	rest := line[sp+1:]
	end := strings.IndexByte(rest, ']')
	if end < 0 {
		return
	}
	inLua := strings.HasSuffix(rest[:end], " lua")
	args := parseQuoted(rest[end+1:])
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lines++
	if !inLua {
		top.ts, top.args = ts, args
		return
	}
	if len(args) < 2 || !strings.HasPrefix(args[1], m.prefix+"{") || !strings.HasSuffix(args[1], "}") {
		return
	}
	key := args[1]
	switch strings.ToUpper(args[0]) {
	case "HSET":
		var tok uint64
		for i := 2; i+1 < len(args); i += 2 {
			if args[i] == "token" {
				tok, _ = strconv.ParseUint(args[i+1], 10, 64)
			}
		}
		if tok == 0 {
			return
		}
		t := &tenure{Start: ts, ExpBase: ts}
		for i := 2; i+1 < len(args); i += 2 {
			switch args[i] {
			case "owner":
				t.Owner = args[i+1]
			case "pid":
				t.PID, _ = strconv.Atoi(args[i+1])
			}
		}
		m.tenures[tenureKey{key, tok}] = t
		m.current[key] = t
	case "PEXPIRE":
		t := m.current[key]
		if t == nil || len(args) < 3 {
			return
		}
		ms, _ := strconv.ParseInt(args[2], 10, 64)
		if t.ExpMs != 0 {
			t.Renewals++
		}
		t.ExpBase, t.ExpMs = top.ts, ms
	case "DEL":
		if t := m.current[key]; t != nil && t.DelAt == 0 {
			t.DelAt = ts
			// evalsha SHA 1 KEY OWNER HOLD ... (release.lua)
			if len(top.args) > 5 && top.args[2] == "1" {
				t.DelOwner, t.DelHold = top.args[4], top.args[5]
			}
		}
	}
}

func (m *monitor) lookup(key string, token uint64) (tenure, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tenures[tenureKey{key, token}]
	if !ok {
		return tenure{}, false
	}
	return *t, true
}

// monitors are the monitors of every lock server of a run (the masters of
// a cluster): a key lives on one of them.
type monitors []*monitor

// lookup finds the tenure of key with token on any server.
func (ms monitors) lookup(key string, token uint64) (tenure, bool) {
	for _, m := range ms {
		if t, ok := m.lookup(key, token); ok {
			return t, true
		}
	}
	return tenure{}, false
}

// each calls f with a copy of every tenure seen on any server.
func (ms monitors) each(f func(key string, token uint64, t tenure)) {
	for _, m := range ms {
		m.mu.Lock()
		for k, t := range m.tenures {
			f(k.key, k.token, *t)
		}
		m.mu.Unlock()
	}
}

// status sums the feed lines read and reports the first feed error.
func (ms monitors) status() (lines int, err error) {
	for _, m := range ms {
		m.mu.Lock()
		lines += m.lines
		if err == nil {
			err = m.err
		}
		m.mu.Unlock()
	}
	return lines, err
}

// parseMicros parses "1700000000.123456" into ns.
func parseMicros(s string) (int64, bool) {
	sec, frac, ok := strings.Cut(s, ".")
	if !ok || len(frac) != 6 {
		return 0, false
	}
	a, err1 := strconv.ParseInt(sec, 10, 64)
	b, err2 := strconv.ParseInt(frac, 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return a*1e9 + b*1e3, true
}

// parseQuoted splits the arguments of a MONITOR line, undoing Redis's
// sdscatrepr quoting.
func parseQuoted(s string) []string {
	var out []string
	for i := 0; i < len(s); i++ {
		if s[i] != '"' {
			continue
		}
		var b strings.Builder
		i++
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] != '\\' || i+1 >= len(s) {
				b.WriteByte(s[i])
				continue
			}
			i++
			switch s[i] {
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'a':
				b.WriteByte('\a')
			case 'b':
				b.WriteByte('\b')
			case 'x':
				if i+2 < len(s) {
					if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
						b.WriteByte(byte(v))
						i += 2
						continue
					}
				}
				b.WriteByte('x')
			default:
				b.WriteByte(s[i])
			}
		}
		out = append(out, b.String())
	}
	return out
}
