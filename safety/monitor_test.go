package safety

import (
	"bufio"
	"cmp"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/distlock/distlock/internal/redisbackend"
)

// The monitor follows the lock server's MONITOR feed, which lists every
// command with the server's wall-clock time in microseconds, including the
// commands run inside scripts ("[0 lua]" lines, which follow the line of
// the script's own call). From it, it rebuilds each tenure of each lock on
// the server: the HSET of the script that wrote owner and token, every
// PEXPIRE while that owner held it, and the DEL that ended it. The end of a
// tenure on the server is its DEL, or else the start of the script of its
// last PEXPIRE plus the lease: the earliest moment at which the server can
// have expired the key. It is the reference the loss signal of the holder
// must precede.
//
// A fair lock changes hands inside a script of someone else: the release
// (release.lua, abandon.lua, forceunlock.lua) DELs the lock and, in the
// same script, grants it to the first live place (an HSET with the new
// owner and token, then its PEXPIRE); a refresh (refresh.lua) or an
// acquisition (fair_acquire.lua) grants a lock whose holder's lease ran out.
// So a tenure is attributed to the owner of its HSET, whatever script wrote
// it, and the DEL to the owner argument of the script that ran it: the
// releasing owner. The monitor also follows the queues of fair locks (the
// ZADD, ZREM and purges of their :q and :qt keys), so that each grant can be
// checked against the places that were waiting when it was made (FIFO, in
// checks_test.go).
//
// An election is a fair mutex whose holder leads (kind=elect): its tenures,
// places and grants are followed as a fair lock's.
//
// The shared kinds (read-write locks and semaphores, the names in shared)
// are followed as far as the checks of who gets them need: their places
// (the same queue keys as a fair lock's), and each admission of a holder
// (the HSET of its t:<owner> field, its token, with its pid from
// i:<owner>), whoever's script wrote it, with its lease (its score in the
// :h sorted set) and its end (its ZREM from :h, or the DEL of the hash).
// Several hold at once, so the server-side exclusion of one tenure per
// hash and the FIFO of the fair queue (a grant may admit several places)
// are not checked on them; their commands are counted (SharedCommands). A
// tenure is still made of an HSET that writes a mutex's owner and token to
// a shared name's hash, which the kinds-never-mix check flags. Their
// exclusion and capacity are checked from the clients' histories
// (sharedchecks_test.go).
type monitor struct {
	addr   string
	prefix string
	shared map[string]bool // names of read-write locks and semaphores

	mu       sync.Mutex
	tenures  map[tenureKey]*tenure
	current  map[string]*tenure  // by key: the latest tenure
	places   map[placeKey]*place // the latest place of each owner of each lock
	queues   map[string][]*place
	allPlace []*place
	grants   []grantEvent
	holders  map[placeKey]*admission // the current holders of the shared locks
	admitted []*admission
	srv      serverChecks
	changed  chan struct{} // closed after the next line is handled (await)
	keepRaw  bool          // keep every line in raw (tests of the monitor)
	raw      []string
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
	Fair     bool   // the HSET wrote kind=fair or kind=elect: a queued mutex
	Kind     string // the HSET's kind: "" (plain), "fair" or "elect"
	By       string // the script that wrote the HSET
	Granted  bool   // written by a script of another owner: a grant
	DelOwner string // owner argument of the script that deleted it
	DelHold  string // hold argument of that script ("0": every hold)
	DelBy    string // the script that deleted it
}

// end is when the tenure ended on the server at the earliest.
func (t *tenure) end() int64 {
	exp := t.ExpBase + t.ExpMs*int64(time.Millisecond)
	if t.DelAt != 0 && t.DelAt < exp {
		return t.DelAt
	}
	return exp
}

// placeKey names an owner of a lock.
type placeKey struct{ name, owner string }

// A place is one place in a queue (of a fair lock, an election, a
// read-write lock or a semaphore), as the server saw it.
type place struct {
	Name     string
	Owner    string // secret: kept in memory, reported as placeID(Owner)
	PID      int    // from the place's QI value
	Added    int64  // the ZADD that made it
	Deadline int64  // when it expires unless refreshed (the latest ZADD of :qt)
	Ended    int64  // 0 while it is in the queue
	How      string // granted, expired, dropped (its owner's release or abandon), cut (the feed broke)
	By       string // the script that ended it
	Token    uint64 // granted: the token of the grant
}

// live says whether the place is in the queue for a script that starts at
// ts: not removed, and its deadline not passed (purge removes the places
// whose deadline is at or before the script's clock).
func (p *place) live(ts int64) bool { return p.Ended == 0 && p.Deadline > ts }

// An admission is one holder of a shared lock (a read-write lock's reader
// or writer, a semaphore's permits), as the server saw it. Times are
// CLOCK_REALTIME ns.
type admission struct {
	Name    string
	Owner   string // secret: kept in memory, reported as placeID(Owner)
	Token   uint64
	PID     int    // from its i:<owner> field: the holder's process
	Start   int64  // the HSET of its token
	By      string // the script that wrote it
	Granted bool   // written by a script of another owner: a grant
	Ends    int64  // its lease's end: its latest score in :h
	Dropped int64  // its ZREM from :h, or the DEL of the hash; 0 if not seen
	Cut     bool   // the feed broke while it held
}

// end is when the admission ended on the server at the latest seen: its
// removal, or its lease's end.
func (a *admission) end() int64 {
	if a.Dropped != 0 && (a.Ends == 0 || a.Dropped < a.Ends) {
		return a.Dropped
	}
	return a.Ends
}

// A grantEvent is a tenure of a fair lock: a grant inside someone else's
// script, or a take by the owner's own request, with the places that were
// live in the queue when it was made.
type grantEvent struct {
	Name  string
	Owner string
	Token uint64
	At    int64  // start of the script that made it
	By    string // that script
	Place bool   // the owner had a place (and left the queue with the grant)
	Ahead []placeRef
}

type placeRef struct {
	Owner string
	Added int64
}

// serverChecks are what the monitor checks on the feed as it reads it.
type serverChecks struct {
	Tenures   int
	Overlaps  int // a tenure written while the previous one of the key could not have expired: must be 0
	StaleDels int // a DEL by a release or abandon of an owner other than the holder: must be 0
	DelBy     map[string]int
	TenuresBy map[string]int // by the script that wrote them, "+grant" when inside another owner's script
	// AdmissionsBy counts the admissions of holders of shared locks, by
	// the script that wrote them ("+grant" as above).
	AdmissionsBy map[string]int
	Resurrected  int // a place made again for an owner whose place had ended
	// SharedCommands counts the commands on the keys of read-write locks
	// and semaphores, which the monitor does not follow.
	SharedCommands int
	// Raised counts the tokens of Redlock holders raised on a node by a
	// later proposal of the same attempt (see monitor.raise).
	Raised int
	Detail []string
}

func (s *serverChecks) note(format string, args ...any) {
	if len(s.Detail) < 10 {
		s.Detail = append(s.Detail, fmt.Sprintf(format, args...))
	}
}

func newMonitor(addr, prefix string) *monitor {
	return &monitor{addr: addr, prefix: prefix, tenures: map[tenureKey]*tenure{}, current: map[string]*tenure{},
		places: map[placeKey]*place{}, queues: map[string][]*place{}, holders: map[placeKey]*admission{},
		srv: serverChecks{DelBy: map[string]int{}, TenuresBy: map[string]int{}, AdmissionsBy: map[string]int{}}}
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
		for _, q := range m.queues {
			for _, p := range q {
				if p.Ended == 0 {
					p.Ended, p.How = -1, "cut"
				}
			}
		}
		m.queues = map[string][]*place{}
		for _, a := range m.holders {
			if a.Dropped == 0 { // still held when the feed broke: its end is unknown
				a.Cut = true
			}
		}
		m.holders = map[placeKey]*admission{}
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
	ts    int64
	args  []string
	first int64 // the time of the script's first command

	parsed  bool
	script  string              // the script's name (redisbackend.ScriptCall), "" for any other command
	argv    []string            // its arguments
	purging map[string]bool     // lock names whose :qt this script has just purged (ZREMRANGEBYSCORE)
	dropped map[placeKey]*place // places this script removed without a purge: granted if an HSET follows
}

func (top *topCommand) parse() {
	if top.parsed {
		return
	}
	top.parsed = true
	if name, _, argv, ok := redisbackend.ScriptCall(anys(top.args)); ok {
		top.script, top.argv = name, argv
	}
}

// refreshArgs is how many arguments refresh.lua takes per place (see its
// header), the owner first.
const refreshArgs = 7

// requestedBy says whether owner is an owner argument of the script: its
// own request (an acquisition, or one of the places a refresh is about).
func (top *topCommand) requestedBy(owner string) bool {
	top.parse()
	switch top.script {
	case "acquire", "fair_acquire", "quorum_acquire", "rw_acquire", "sem_acquire":
		return len(top.argv) > 0 && top.argv[0] == owner
	case "refresh":
		for i := 0; i < len(top.argv); i += refreshArgs {
			if top.argv[i] == owner {
				return true
			}
		}
	}
	return false
}

// splitKey splits a key of the lock server into the lock name and what
// follows the name's braces ("" for the lock hash, ":q", ":fence", ...).
func (m *monitor) splitKey(key string) (name, suffix string, ok bool) {
	rest, ok := strings.CutPrefix(key, m.prefix+"{")
	if !ok {
		return "", "", false
	}
	name, suffix, ok = strings.Cut(rest, "}")
	return name, suffix, ok
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
	if m.keepRaw {
		m.raw = append(m.raw, line)
	}
	if m.changed != nil {
		close(m.changed)
		m.changed = nil
	}
	if !inLua {
		*top = topCommand{ts: ts, args: args}
		return
	}
	if top.first == 0 {
		top.first = ts
	}
	if len(args) < 2 {
		return
	}
	name, suffix, ok := m.splitKey(args[1])
	if !ok {
		return
	}
	cmd := strings.ToUpper(args[0])
	shared := m.shared[name]
	if shared {
		m.srv.SharedCommands++
	}
	switch suffix {
	case "":
		m.lockCommand(cmd, args, name, ts, top)
		if shared {
			m.sharedCommand(cmd, args, name, ts, top)
		}
	case ":q", ":qt", ":qi":
		m.queueCommand(cmd, suffix, args, name, ts, top)
	case ":h":
		if shared {
			m.holdersCommand(cmd, args, name, ts)
		}
	}
}

// sharedCommand follows the commands on a shared lock's hash: an HSET of
// t:<owner> admits a holder (shared_admit); a DEL ends every holder.
func (m *monitor) sharedCommand(cmd string, args []string, name string, ts int64, top *topCommand) {
	switch cmd {
	case "HSET":
		pids := map[string]int{}
		for i := 2; i+1 < len(args); i += 2 {
			if owner, ok := strings.CutPrefix(args[i], "i:"); ok { // 'pid since host'
				pids[owner], _ = strconv.Atoi(strings.Fields(args[i+1] + " x")[0])
			}
		}
		for i := 2; i+1 < len(args); i += 2 {
			owner, ok := strings.CutPrefix(args[i], "t:")
			if !ok {
				continue
			}
			tok, _ := strconv.ParseUint(args[i+1], 10, 64)
			top.parse()
			a := &admission{Name: name, Owner: owner, Token: tok, PID: pids[owner], Start: ts, By: top.script,
				Granted: !top.requestedBy(owner)}
			by := a.By
			if a.Granted {
				by += "+grant"
			}
			m.srv.AdmissionsBy[by]++
			if old := m.holders[placeKey{name, owner}]; old != nil && old.Dropped == 0 {
				old.Dropped = ts // cannot happen: an owner is admitted once
			}
			m.holders[placeKey{name, owner}] = a
			m.admitted = append(m.admitted, a)
			m.leaveQueue(name, owner, tok, top)
		}
	case "DEL":
		for k, a := range m.holders {
			if k.name == name && a.Dropped == 0 {
				a.Dropped = ts
			}
		}
	}
}

// holdersCommand follows a shared lock's holders set: a holder's lease is
// its score (server ms), a ZREM ends it.
func (m *monitor) holdersCommand(cmd string, args []string, name string, ts int64) {
	switch cmd {
	case "ZADD":
		i := 2
		for ; i < len(args); i++ { // past NX, XX, GT, LT, CH, INCR
			if _, err := strconv.ParseFloat(args[i], 64); err == nil {
				break
			}
		}
		for ; i+1 < len(args); i += 2 {
			if a := m.holders[placeKey{name, args[i+1]}]; a != nil {
				ms, _ := strconv.ParseInt(args[i], 10, 64)
				a.Ends = ms * int64(time.Millisecond)
			}
		}
	case "ZREM":
		for _, owner := range args[2:] {
			if a := m.holders[placeKey{name, owner}]; a != nil && a.Dropped == 0 {
				a.Dropped = ts
			}
		}
	}
}

// lockCommand follows the commands on a lock hash.
func (m *monitor) lockCommand(cmd string, args []string, name string, ts int64, top *topCommand) {
	key := args[1]
	switch cmd {
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
		top.parse()
		if m.raise(key, tok, args, top) {
			return
		}
		t := &tenure{Start: ts, ExpBase: ts, By: top.script}
		for i := 2; i+1 < len(args); i += 2 {
			switch args[i] {
			case "owner":
				t.Owner = args[i+1]
			case "i": // 'pid since host'
				t.PID, _ = strconv.Atoi(strings.Fields(args[i+1] + " x")[0])
			case "kind":
				t.Kind = args[i+1]
				t.Fair = t.Kind == "fair" || t.Kind == "elect"
			}
		}
		t.Granted = !top.requestedBy(t.Owner)
		m.srv.Tenures++
		by := t.By
		if t.Granted {
			by += "+grant"
		}
		m.srv.TenuresBy[by]++
		// Mutual exclusion on the server: the previous tenure of the key
		// was deleted, or had expired when this script started (a script
		// sees the keys as of its start, which is before its first
		// command). The previous lease ran from the start of its
		// PEXPIRE's script at the earliest; 2 ms cover the millisecond
		// rounding of expiries.
		if prev := m.current[key]; prev != nil && prev.DelAt == 0 && prev.ExpMs > 0 &&
			top.first+2*int64(time.Millisecond) < prev.ExpBase+prev.ExpMs*int64(time.Millisecond) {
			m.srv.Overlaps++
			m.srv.note("%s: token %d written by %s at %d while token %d could still be held (its lease of %d ms from %d)",
				key, tok, top.script, top.first, prev.tokenOf(m), prev.ExpMs, prev.ExpBase)
		}
		m.tenures[tenureKey{key, tok}] = t
		m.current[key] = t
		if t.Fair {
			m.grant(name, t, tok, top)
		}
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
		t := m.current[key]
		if t == nil || t.DelAt != 0 {
			return
		}
		t.DelAt = ts
		top.parse()
		t.DelBy = top.script
		m.srv.DelBy[top.script]++
		switch top.script {
		case "release":
			if len(top.argv) > 1 {
				t.DelOwner, t.DelHold = top.argv[0], top.argv[1]
			}
		case "abandon":
			if len(top.argv) > 0 {
				t.DelOwner, t.DelHold = top.argv[0], "0"
			}
		}
		// release.lua and abandon.lua delete the lock of the owner they
		// are called for, and only that one: a stale release (a lease
		// that was lost, an owner given up late) never deletes a
		// successor's lock.
		if (top.script == "release" || top.script == "abandon") && t.DelOwner != t.Owner {
			m.srv.StaleDels++
			m.srv.note("%s: %s of owner %s deleted the lock of owner %s", key, top.script, placeID(t.DelOwner), placeID(t.Owner))
		}
	}
}

// raise handles an HSET of a Redlock node (quorum_acquire.lua) that only
// raises the token of the lock's holder: the owner already took the lock
// there with a lower token proposed earlier in the same attempt, and holds
// it on with the new token (the token every node of its quorum gives it).
// It is the same tenure, known by its new token from then on. It reports
// whether the HSET was such a raise.
func (m *monitor) raise(key string, tok uint64, args []string, top *topCommand) bool {
	if top.script != "quorum_acquire" || len(args) != 4 || len(top.argv) == 0 {
		return false
	}
	t := m.current[key]
	if t == nil || t.DelAt != 0 || t.Owner != top.argv[0] {
		return false
	}
	old := tenureKey{key, t.tokenOf(m)}
	delete(m.tenures, old)
	m.tenures[tenureKey{key, tok}] = t
	m.srv.Raised++
	return true
}

// tokenOf finds the token of t (for messages).
func (t *tenure) tokenOf(m *monitor) uint64 {
	for k, x := range m.tenures {
		if x == t {
			return k.token
		}
	}
	return 0
}

// grant records the tenure t of a fair lock (or an election), with the
// places that were live when the script that wrote it started.
func (m *monitor) grant(name string, t *tenure, tok uint64, top *topCommand) {
	g := grantEvent{Name: name, Owner: t.Owner, Token: tok, At: top.ts, By: top.script}
	g.Place = m.leaveQueue(name, t.Owner, tok, top)
	for _, p := range m.queues[name] {
		if p.Owner != t.Owner && p.live(top.ts) {
			g.Ahead = append(g.Ahead, placeRef{p.Owner, p.Added})
		}
	}
	m.grants = append(m.grants, g)
}

// leaveQueue ends the place of owner, if it has one, as granted the lock
// with token tok by the script top, and reports whether it had one.
func (m *monitor) leaveQueue(name, owner string, tok uint64, top *topCommand) bool {
	if p := top.dropped[placeKey{name, owner}]; p != nil {
		p.How, p.Token = "granted", tok
		return true
	}
	if p := m.places[placeKey{name, owner}]; p != nil && p.Ended == 0 {
		// Not seen leaving the queue: take it out now.
		p.Ended, p.How, p.By, p.Token = top.ts, "granted", top.script, tok
		return true
	}
	return false
}

// queueCommand follows the commands on a fair lock's queue keys.
func (m *monitor) queueCommand(cmd, suffix string, args []string, name string, ts int64, top *topCommand) {
	switch {
	case suffix == ":q" && cmd == "ZADD" && len(args) >= 4:
		owner := args[3]
		k := placeKey{name, owner}
		if old := m.places[k]; old != nil {
			if old.Ended == 0 {
				return // cannot happen: fair_acquire keeps an existing place
			}
			m.srv.Resurrected++
			m.srv.note("%s: owner %s queued again after its place ended (%s by %s)", name, placeID(owner), old.How, old.By)
		}
		top.parse()
		p := &place{Name: name, Owner: owner, Added: ts, Deadline: math.MaxInt64, By: top.script}
		m.places[k] = p
		m.allPlace = append(m.allPlace, p)
		// Drop the ended places from the live queue as it grows.
		q := m.queues[name][:0]
		for _, x := range m.queues[name] {
			if x.Ended == 0 {
				q = append(q, x)
			}
		}
		m.queues[name] = append(q, p)
	case suffix == ":qt" && cmd == "ZADD" && len(args) >= 4:
		if p := m.places[placeKey{name, args[3]}]; p != nil && p.Ended == 0 {
			ms, _ := strconv.ParseInt(args[2], 10, 64)
			p.Deadline = ms * int64(time.Millisecond)
		}
	case suffix == ":qt" && cmd == "ZREMRANGEBYSCORE":
		if top.purging == nil {
			top.purging = map[string]bool{}
		}
		top.purging[name] = true
	case suffix == ":qi" && cmd == "HSET" && len(args) >= 4:
		if p := m.places[placeKey{name, args[2]}]; p != nil && p.Ended == 0 {
			p.PID, _ = placePID(m.prefix+"{"+name+"}", args[3])
		}
	case suffix == ":q" && cmd == "ZREM":
		purge := top.purging[name]
		delete(top.purging, name)
		top.parse()
		for _, owner := range args[2:] {
			p := m.places[placeKey{name, owner}]
			if p == nil || p.Ended != 0 {
				continue // no place: drop_place of an owner that had none
			}
			p.Ended, p.By = ts, top.script
			if purge {
				p.How = "expired"
				continue
			}
			p.How = "dropped"
			if top.dropped == nil {
				top.dropped = map[placeKey]*place{}
			}
			top.dropped[placeKey{name, owner}] = p
		}
	}
}

// await waits until cond, called with m.mu held, is true after some line
// of the feed was handled, or ctx ends.
func (m *monitor) await(ctx context.Context, cond func() bool) error {
	for {
		m.mu.Lock()
		ok := cond()
		if m.changed == nil {
			m.changed = make(chan struct{})
		}
		ch := m.changed
		m.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
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

// quorumLookup finds the tenure of key with token on each master of a
// Redlock quorum, and returns the one that ends the lock's hold on a
// quorum of q masters: the lock can be taken by another owner once q
// masters are free of it, and the masters without the tenure are, so
// that is when s-q+1 of the s tenures have ended (the (s-q+1)-th earliest
// end). A tenure cut by a kill ends, for this, at its expiry: a master
// killed and restarted empty is kept down for longer than any lease
// (delayed restarts), so it gives no vote before then. It reports how many
// masters had the tenure, and false if fewer than q did.
func (ms monitors) quorumLookup(key string, token uint64, q int) (tenure, int, bool) {
	var ts []tenure
	for _, m := range ms {
		if t, ok := m.lookup(key, token); ok {
			ts = append(ts, t)
		}
	}
	if len(ts) < q {
		return tenure{}, len(ts), false
	}
	slices.SortFunc(ts, func(a, b tenure) int { return cmp.Compare(a.end(), b.end()) })
	return ts[len(ts)-q], len(ts), true
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

// fair returns copies of every place and grant of a fair lock seen on any
// server, and the sums of the server-side checks.
func (ms monitors) fair() (places []place, grants []grantEvent, srv serverChecks) {
	srv.DelBy, srv.TenuresBy, srv.AdmissionsBy = map[string]int{}, map[string]int{}, map[string]int{}
	for _, m := range ms {
		m.mu.Lock()
		for _, p := range m.allPlace {
			places = append(places, *p)
		}
		grants = append(grants, m.grants...)
		s := m.srv
		srv.Tenures += s.Tenures
		srv.Overlaps += s.Overlaps
		srv.StaleDels += s.StaleDels
		srv.Resurrected += s.Resurrected
		srv.SharedCommands += s.SharedCommands
		srv.Raised += s.Raised
		for k, v := range s.DelBy {
			srv.DelBy[k] += v
		}
		for k, v := range s.TenuresBy {
			srv.TenuresBy[k] += v
		}
		for k, v := range s.AdmissionsBy {
			srv.AdmissionsBy[k] += v
		}
		srv.Detail = append(srv.Detail, s.Detail...)
		m.mu.Unlock()
	}
	return places, grants, srv
}

// admissions returns copies of every admission of a holder of a shared
// lock seen on any server.
func (ms monitors) admissions() []admission {
	var out []admission
	for _, m := range ms {
		m.mu.Lock()
		for _, a := range m.admitted {
			out = append(out, *a)
		}
		m.mu.Unlock()
	}
	return out
}

// placePID reads the pid in the QI value v of a place of the lock whose
// key is lock: 'kind n seq lease queue channel pid host' (lib.lua,
// place_value), the channel being lock + ':grant:' + a process id. The
// lock key may hold spaces, and the host is the rest of the value, so
// only the five numbers at the start are words; the channel is matched as
// the text it must be, as place_info does.
func placePID(lock, v string) (int, bool) {
	f := strings.SplitN(v, " ", 6)
	if len(f) < 6 {
		return 0, false
	}
	rest, ok := strings.CutPrefix(f[5], lock+":grant:")
	if !ok {
		return 0, false
	}
	g := strings.SplitN(rest, " ", 3)
	if len(g) < 2 {
		return 0, false
	}
	pid, err := strconv.Atoi(g[1])
	return pid, err == nil
}

// placeID names an owner in reports and histories without revealing it
// (owner ids are secrets: whoever knows one can release its lock).
func placeID(owner string) string {
	sum := sha1.Sum([]byte(owner))
	return hex.EncodeToString(sum[:8])
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

// anys converts a command's arguments for redisbackend.ScriptCall.
func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
