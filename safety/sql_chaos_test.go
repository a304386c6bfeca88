//go:build linux

package safety

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/etcdtest"
	"github.com/distlock/distlock/redistest"
	"github.com/distlock/distlock/sqlstore"
	"github.com/distlock/distlock/sqltest"
	"github.com/distlock/distlock/store"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The SQL chaos run (TestChaosSQL; TestChaosSQLMariaDB, shorter): the
// workload of the etcd mode (TestChaosEtcd: plain mutexes, MultiMutexes of
// two names, and every queued kind) on sqlstore, over ONE database server
// that sqltest runs (PostgreSQL, or MariaDB), from client processes
// (re-executions of the test binary, so that they can be stopped with
// SIGSTOP) that each reach the server through a TCP proxy of their own
// (etcdtest.NewProxy): a client's proxy is its network, which a fault can
// freeze or reset without touching anyone else's.
//
// Faults, on a seeded schedule (the etcd mode's: each kind once, in a
// seeded order, with one quiet stretch of 3.5–4.5 leases in the middle of
// that round for the linearizability check; then kinds at random):
//
//   - sql-server-kill: the server killed (SIGKILL, the postmaster and its
//     backends; every connection reset), and restarted from its data
//     directory once it has been down 0.5–1.5 leases (Restart runs crash
//     recovery and awaits it ready): committed transactions survive;
//   - sql-server-sigstop: the server stopped (SIGSTOP, every process of
//     it) for 0.5–2 leases, then resumed: requests hang, then are served
//     with the database's clock moved on;
//   - sql-client-cut-off: one client's proxy (a holder's, or a waiter's,
//     if one holds or waits) paused for 0.5–1.5 leases: its requests hang
//     (a transaction that holds a row FOR UPDATE holds it meanwhile), and
//     its listening connection hears nothing;
//   - sql-connection-reset: one client's connections (a holder's or a
//     waiter's) reset through its proxy (Proxy.Cut) every 50 ms for
//     0.2–0.6 lease, those made again meanwhile included;
//   - holder-sigstop, holder-sigkill, ctx-cancel-storm: as in TestChaos
//     (the holder or waiter found by the pid in its row's state).
//
// The lease is 2 s (-chaos.sql.lease; sqlstore's floor, MinLease, is
// 1 s), so that leases run out during the run; Extend goes to 1–3
// leases, and 20 % of the holds outlive the lease.
//
// The server's own timeline replaces MONITOR: a sampler in the test
// process reads the whole table every 20 ms on a connection of its own,
// straight to the server (SELECT of the database's clock in µs and every
// row's name, token and state, in one statement, so one snapshot), and
// records when each read was sent and when it returned
// (CLOCK_MONOTONIC). A state the sampler read was certainly committed
// before the read returned, and a state it did not read was certainly not
// committed before the read was sent (reads are sequential: each is a
// snapshot taken after the previous one returned). What cannot be
// decided either way is counted, not failed. The state column names each
// holder (its owner, its token, its lease's end by the database's clock,
// its process) and each place in a queue: "live" below means its end is
// after the database's clock of the sample.
//
// What is checked (the test fails otherwise): every checker of TestChaos
// that rests on the clients' histories (linearizability on windows
// without a disruptive fault, validity intervals of different owners
// never overlapping, server kills included, since committed data
// survives them; the fenced register, token order, typed errors only,
// released leases never reported lost, no goroutine leak in the
// clients), and on the timeline:
//
//   - in every sample, each row's state is one the store may write: its
//     token never below an earlier sample's; no holder's token above the
//     row's; a holder first seen with a token above the row's token in
//     the sample before (tokens are minted from it); no holder gone and
//     back (but across a server kill, which may lose a release committed
//     without waiting for the disk: counted); at most one live holder of
//     an exclusive kind, no live writer of a read-write lock beside
//     another live holder, no more live permits than a semaphore's
//     capacity; its kind the name's (or none); no live lease longer than
//     3 leases (Extend's most), no live place longer than the longest
//     queue timeout, no live holder or place of an owner whose
//     abandonment mark is live;
//   - every holder seen in a row has a token that its owner's
//     acquisition requests were told they took, if they were told they
//     took one (a grant made by another owner's step is told to no
//     request of its owner); each acquisition's token is, if a sample saw
//     it, held by one of that call's owners (the holders of other tokens
//     of a call's owners are counted: earlier attempts, given up);
//   - every loss of an unpaused holder was signalled before a sample
//     showed the lock held by another owner (a live holder with a higher
//     token): a sample that showed it and returned before the signal
//     fails; one sent after the signal that did not show it proves it in
//     time; neither is counted undecided;
//   - nothing of a call that gave up is left: no live holder or place of
//     its owners in a sample sent after the call returned (and
//     giveUpMargin), as in the etcd mode (left out, counted: calls during
//     which a clean-up or other request of their process failed; excused,
//     counted: owners whose abandonment was not confirmed by the return);
//   - once the clients have closed and the leases could have run out, no
//     live holder or place is left.
//
// Not checked here: FIFO, Close under load, jobs run once, set-permits
// (none of them runs in this mode), and what needs a writer's identity
// per change (the sampler sees states, not the steps between them: two
// steps within 20 ms look like one).

// Fault kinds of the SQL mode.
const (
	faultSQLKill   = "sql-server-kill"
	faultSQLPause  = "sql-server-sigstop"
	faultSQLCutOff = "sql-client-cut-off"
	faultSQLReset  = "sql-connection-reset"
)

// sqlFaultKinds are the SQL run's faults.
var sqlFaultKinds = []string{faultSQLKill, faultSQLPause, faultSQLCutOff, faultSQLReset,
	faultHolderPause, faultHolderKill, faultCancelStorm}

// sqlChaosKinds are the lock kinds the SQL run exercises: the etcd mode's
// (see etcdChaosKinds); a kind the store refuses is left out, and logged.
var sqlChaosKinds = []string{"plain", "multi", "fair", "elect", "rw", "sem"}

var (
	flagSQLSeed     = flag.Int64("chaos.sql.seed", 0, "seed of the SQL chaos runs (0: -seed's, or time-based; printed)")
	flagSQLDuration = flag.Duration("chaos.sql.duration", 0, "length of the SQL chaos runs (0: -chaos.duration's, or 30s for TestChaosSQL and 20s for TestChaosSQLMariaDB, or 8m with -long)")
	flagSQLLease    = flag.Duration("chaos.sql.lease", 2*time.Second, "lease (TTL) of the SQL chaos runs' locks (sqlstore's floor is 1s)")
	flagSQLMariaDB  = flag.Bool("chaos.sql.mariadb", true, "run TestChaosSQLMariaDB; -chaos.sql.mariadb=false skips it")
)

// The SQL servers.
const (
	sqlPostgres = "postgres"
	sqlMariaDB  = "mariadb"
)

// sqlSampleEvery is the pace of the table sampler.
const sqlSampleEvery = 20 * time.Millisecond

// TestChaosSQL is TestChaosEtcd's workload on sqlstore over one
// PostgreSQL server, with server kills and stops, clients cut off or
// their connections reset, and holders stopped or killed among the faults
// (see sql_chaos_test.go).
func TestChaosSQL(t *testing.T) { runChaosSQL(t, sqlPostgres, sqlDuration(30*time.Second)) }

// TestChaosSQLMariaDB is TestChaosSQL, shorter, on MariaDB (whose store
// polls: no notifications).
func TestChaosSQLMariaDB(t *testing.T) {
	if !*flagSQLMariaDB {
		t.Skip("TestChaosSQLMariaDB is skipped with -chaos.sql.mariadb=false")
	}
	runChaosSQL(t, sqlMariaDB, sqlDuration(20*time.Second))
}

// sqlDuration is the length of a SQL run: -chaos.sql.duration's, or
// chaosDuration's.
func sqlDuration(short time.Duration) time.Duration {
	if *flagSQLDuration > 0 {
		return *flagSQLDuration
	}
	return chaosDuration(short)
}

// sqlServer is what the run does with its server (sqltest's Postgres and
// MariaDB).
type sqlServer interface {
	Addr() string
	DSN() string
	PID() int
	Kill() error
	Restart() error
	Pause() error
	Resume() error
}

// sqlRun is the SQL mode's part of a chaosRun.
type sqlRun struct {
	flavor  string
	srv     sqlServer
	proxies []*etcdtest.Proxy // by slot: the slot's proxy to the server
	tl      *sqlTimeline
	kinds   []string
	report  sqlReport
}

// dsn is the server's DSN through addr (a proxy's address).
func (s *sqlRun) dsn(addr string, lease time.Duration) string {
	if s.flavor == sqlMariaDB {
		cfg, err := mysql.ParseDSN(s.srv.DSN())
		if err != nil {
			panic(err)
		}
		cfg.Addr, cfg.Timeout = addr, sqlClientTimeout(lease)
		return cfg.FormatDSN()
	}
	u, err := url.Parse(s.srv.DSN())
	if err != nil {
		panic(err)
	}
	u.Host = addr
	return u.String()
}

// configure sets the SQL mode's part of the configuration of the client
// in slot.
func (s *sqlRun) configure(cfg *clientConfig, slot int) {
	cfg.SQL, cfg.SQLFlavor = s.dsn(s.proxies[slot].Addr(), cfg.Lease), s.flavor
	cfg.MultiRate, cfg.ExtendMin, cfg.LongRate = etcdMultiRate, 1, etcdLongRate
	if !slices.Contains(s.kinds, "multi") {
		cfg.MultiRate = 0
	}
}

func runChaosSQL(t *testing.T, flavor string, dur time.Duration) {
	seed := *flagSQLSeed
	if seed == 0 {
		seed = *flagSeed
	}
	if seed == 0 {
		seed = time.Now().UnixNano() % 1_000_000_000
	}
	t.Logf("chaos: seed %d, duration %v (replay: go test -race -run '%s$' -chaos.sql.seed=%d -chaos.sql.duration=%v)", seed, dur, t.Name(), seed, dur)
	lease := *flagSQLLease
	r := &chaosRun{t: t, rng: rand.New(rand.NewSource(seed)), seed: seed, lease: lease, unit: lease, dir: t.TempDir(), dur: dur,
		clients: *flagClients}
	r.fair, r.elect, r.rw, r.sem, r.semQueue = map[string]time.Duration{}, map[string]time.Duration{}, map[string]time.Duration{}, map[string]int{}, 2*lease
	for i := 0; i < *flagNames; i++ {
		r.names = append(r.names, chaosName("chaos", i))
	}
	r.kinds = sqlFaultKinds

	s := &sqlRun{flavor: flavor}
	r.sql = s
	switch flavor {
	case sqlMariaDB:
		s.srv = sqltest.StartMariaDB(t)
	default:
		s.srv = sqltest.StartPostgres(t)
	}
	s.report.Flavor = flavor
	s.kinds = r.sqlKinds()
	s.report.Kinds = s.kinds
	r.storeSrv = redistest.Start(t)
	store := r.storeSrv.Client(t)

	// The proxies: each slot's client reaches the server through a proxy
	// of its own.
	for range r.clients {
		p, err := etcdtest.NewProxy(s.srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		s.proxies = append(s.proxies, p)
	}
	defer func() {
		for _, p := range s.proxies {
			p.Resume()
			_ = p.Close()
		}
	}()

	// The server's timeline, from before the first client.
	s.tl = startSQLTimeline(flavor, s.srv.DSN())
	defer s.tl.stop()
	if !s.tl.awaitSample(10 * time.Second) {
		t.Fatalf("the table sampler read nothing within 10s: %v", s.tl.lastErr())
	}

	r.start = mono()
	r.current = make([]*clientProc, r.clients)
	for i := range r.current {
		r.spawn(i)
	}
	r.scheduleRounds(time.Now().Add(dur), r.injectSQL)
	runEnd := mono()
	r.stopClients()
	stopped := mono()
	r.awaitSQLOrphans()
	s.tl.stop()

	rep := r.check(store, nil, runEnd)
	t.Logf("sql: phases: run %v, clients stopped in %v, orphans awaited %v, checks %v",
		time.Duration(runEnd-r.start).Round(time.Millisecond), time.Duration(stopped-runEnd).Round(time.Millisecond),
		s.report.Orphans.Waited, time.Duration(mono()-stopped).Round(time.Millisecond))
	rep.SQL = &s.report
	rep.Seed, rep.Duration = seed, dur.String()
	rep.Command = fmt.Sprintf("cd safety && go test -race -count=1 -timeout 30m -run '%s$' -chaos.sql.seed=%d -chaos.sql.duration=%v -chaos.clients=%d -chaos.workers=%d -chaos.names=%d -chaos.marks=%v -chaos.sql.lease=%v -chaos.work=%v -v .",
		t.Name(), seed, dur, r.clients, *flagWorkers, *flagNames, *flagMarks, r.lease, *flagWork)
	rep.log(t)
	if *flagReport != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(*flagReport, b, 0o644); err != nil {
			t.Error(err)
		}
	}
	for _, v := range rep.violations() {
		t.Error(v)
	}
	if t.Failed() {
		keep := filepath.Join(os.TempDir(), fmt.Sprintf("chaos-sql-%s-%d-%d", flavor, seed, os.Getpid()))
		if err := os.CopyFS(keep, os.DirFS(r.dir)); err == nil {
			t.Logf("the histories are kept in %s", keep)
		}
	}
}

// sqlKinds probes which kinds the store serves, on a pool of the test
// process's own, straight to the server (which makes the store's tables
// before the sampler starts), adds the names of the kinds of
// sqlChaosKinds that it serves, and returns those kinds.
func (r *chaosRun) sqlKinds() []string {
	s := r.sql
	var st store.Store
	switch s.flavor {
	case sqlMariaDB:
		db, err := sql.Open("mysql", s.srv.DSN())
		if err != nil {
			r.t.Fatal(err)
		}
		defer db.Close()
		st = sqlstore.NewMySQL(db)
	default:
		pool, err := pgxpool.New(context.Background(), s.srv.DSN())
		if err != nil {
			r.t.Fatal(err)
		}
		defer pool.Close()
		st = sqlstore.NewPostgres(pool)
	}
	kinds, unsupported, nowServed := r.probeKinds(st, "sql", "sqlChaosKinds (sql_chaos_test.go)", sqlChaosKinds, sqlstore.MinLease)
	s.report.Unsupported, s.report.NowServed = unsupported, nowServed
	return kinds
}

// sqlHolderSlot finds a slot whose client holds a lock now (the pid of a
// live holder in the last sample of the table), or, half the time when
// there are queued names, one whose client waits in a queue (a live
// place's pid), or a random slot; it reports which it found.
func (r *chaosRun) sqlHolderSlot() (int, string) {
	last, ok := r.sql.tl.last()
	what := "holder"
	if len(r.fair)+len(r.elect)+len(r.rw)+len(r.sem) > 0 && r.rng.Intn(2) == 0 {
		what = "waiter"
	}
	var pids []int
	for _, name := range r.names {
		row := last.Rows[name]
		if !ok || row == nil {
			continue
		}
		if what == "holder" {
			for _, h := range row.Holders {
				if h.Until > last.Now {
					pids = append(pids, h.PID)
				}
			}
		} else {
			for _, p := range row.Queue {
				if p.Until > last.Now {
					pids = append(pids, p.PID)
				}
			}
		}
	}
	slices.Sort(pids)
	r.rng.Shuffle(len(pids), func(i, j int) { pids[i], pids[j] = pids[j], pids[i] })
	for _, pid := range pids {
		for i, p := range r.current {
			if p.cmd.Process.Pid == pid {
				return i, what
			}
		}
	}
	return r.rng.Intn(len(r.current)), "random"
}

// injectSQL injects one fault of the SQL mode and records it.
func (r *chaosRun) injectSQL(kind string, frac func(lo, hi float64) time.Duration) {
	t, s := r.t, r.sql
	f := fault{Kind: kind, Slot: -1, Client: -1, Node: -1}
	switch kind {
	case faultHolderKill:
		slot, what := r.sqlHolderSlot()
		r.killClient(&f, slot, what)
	case faultHolderPause:
		slot, what := r.sqlHolderSlot()
		r.pauseClient(&f, slot, what, frac(1.2, 2.5))
	case faultCancelStorm:
		r.storm(&f, kind, frac)
	case faultSQLKill:
		down := frac(0.5, 1.5)
		pid := s.srv.PID()
		f.Start = mono()
		killed := time.Now()
		if err := s.srv.Kill(); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if rest := down - time.Since(killed); rest > 0 {
			time.Sleep(rest) // the server's time down
		}
		downFor := time.Since(killed)
		if err := s.srv.Restart(); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		f.End = mono()
		f.Detail = fmt.Sprintf("pid %d killed; restarted after %v, ready %v later (pid %d)",
			pid, downFor.Round(time.Millisecond), (time.Since(killed) - downFor).Round(time.Millisecond), s.srv.PID())
	case faultSQLPause:
		d := frac(0.5, 2)
		f.Detail = fmt.Sprintf("for %v", d.Round(time.Millisecond))
		f.Start = mono()
		if err := s.srv.Pause(); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		time.Sleep(d) // the fault's length
		if err := s.srv.Resume(); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		f.End = mono()
	case faultSQLCutOff:
		slot, what := r.sqlHolderSlot()
		d := frac(0.5, 1.5)
		f.Slot, f.Client = slot, r.current[slot].id
		f.Detail = fmt.Sprintf("%s's proxy paused for %v", what, d.Round(time.Millisecond))
		f.Start = mono()
		s.proxies[slot].Pause()
		time.Sleep(d) // the fault's length
		s.proxies[slot].Resume()
		f.End = mono()
	case faultSQLReset:
		slot, what := r.sqlHolderSlot()
		d := frac(0.2, 0.6)
		f.Slot, f.Client = slot, r.current[slot].id
		p := s.proxies[slot]
		f.Start = mono()
		cuts, conns := 0, 0
		for end := time.Now().Add(d); ; {
			conns += p.Conns()
			p.Cut()
			cuts++
			if time.Now().Add(50 * time.Millisecond).After(end) {
				break
			}
			time.Sleep(50 * time.Millisecond) // between resets
		}
		f.End = mono()
		f.Detail = fmt.Sprintf("%s's connections reset for %v: %d resets, %d connections", what, d.Round(time.Millisecond), cuts, conns)
	}
	r.record(f)
}

// awaitSQLOrphans waits, once every client has closed, until a sample of
// the table shows no live holder and no live place of the run's names
// (the leases of killed holders run out by themselves), for the longest
// lease (3 leases, Extend's most) and 10 s at most; then counts what is
// left.
func (r *chaosRun) awaitSQLOrphans() {
	s := r.sql
	o := &s.report.Orphans
	closed := mono()
	begin := time.Now()
	deadline := time.After(3*r.lease + 10*time.Second)
	seen := false
	for {
		changed := s.tl.changes()
		if last, ok := s.tl.last(); ok && last.Send > closed {
			n := 0
			o.Marks = 0
			for _, name := range r.names {
				if row := last.Rows[name]; row != nil {
					n += row.live(last.Now)
					for _, until := range row.Marks {
						if until > last.Now {
							o.Marks++
						}
					}
				}
			}
			if !seen {
				o.AtClose, seen = n, true
			}
			if n == 0 {
				o.Waited = time.Since(begin).Round(time.Millisecond).String()
				return
			}
			o.Left = n
		}
		select {
		case <-changed:
		case <-deadline:
			if !seen {
				s.report.note("no sample of the table after the clients closed")
			}
			s.report.note("live holders and places left %v after the clients closed: %d", time.Since(begin).Round(time.Millisecond), o.Left)
			return
		}
	}
}

// sqlReport is the SQL mode's part of the chaos report.
type sqlReport struct {
	Flavor      string   // postgres or mariadb
	Kinds       []string // the lock kinds run
	Unsupported []string // listed in sqlChaosKinds, refused by the store
	NowServed   []string // served by the store, not listed yet
	Multi       struct {
		Calls, Acquired int
	}
	Faults   []string // each fault of the server or the network, with what happened
	Timeline struct {
		Samples, FailedReads, Reconnects int
		RowVersions                      int     // distinct states of the run's rows
		Holders                          int     // distinct holders (name, token) seen
		LongestGapMs                     float64 // between two samples' returns
	}
	// Rows: what every sample's rows say (see the top of this file).
	Rows struct {
		TokenBack, HolderAboveRow, NewNotAbove, Reappeared int // must be 0
		ReappearedAfterKill                                int // a holder gone and back across a server kill: counted
		Exclusion, WriterShared, SemOver, KindMismatch     int // must be 0
		OverBound, MarkedLive                              int // must be 0
		Unreadable                                         int // states that are not sqlstore's JSON: must be 0
		Detail                                             []string
	}
	// Tokens: each successful acquisition's token, if a sample saw it
	// held, is held by one of its call's owners.
	Tokens struct {
		Checked, Matched, NotSampled, OtherOwner int
		Detail                                   []string
	}
	// Holders: each holder seen, against its owner's call.
	Holders struct {
		Seen, Matched, OtherAttempt, OfFailedCall, Unlinked int
		// OtherToken: a holder whose token is none of those its owner's
		// acquisition requests were told they took: must be 0.
		OtherToken int
		Detail     []string
	}
	// LossSignal: every loss of an unpaused holder signalled before a
	// sample showed the lock held by another owner.
	LossSignal struct {
		Losses, Checked, First, Late, Undecided, NotTaken int
		ExcludedPaused, NeverHandedOut, Shared            int
		// Leads of the signal before the lease's end, for the holders
		// still in their row in a sample sent after the signal (which
		// shows their last lease end: the database's clock, against the
		// clients' CLOCK_REALTIME, one machine), and the signals after
		// it: figures, not asserted (the engine gives a lease up
		// margin(lease), 45 ms for 2 s, before its end; a timer later
		// than that on a loaded machine would show here).
		SampledLeads, AfterSampledEnd int
		MinLeadMs, MedianLeadMs       float64
		Detail                        []string
		AfterSampledEndDetail         []string
	}
	// GiveUp: nothing of a call that returned an error is left.
	GiveUp struct {
		Owners, Unlinked, OfSuccesses, Checked, ExcludedCleanup int
		Unconfirmed                                             int // seen after the return, their abandonment not confirmed by it: excused
		TakenAfter, LeftAfter                                   int // must be 0
		Detail                                                  []string
	}
	Orphans struct {
		AtClose, Left, Marks int
		Waited               string
	}
	Errors []string // the harness's own failures
}

func (e *sqlReport) note(format string, args ...any) {
	if len(e.Errors) < 20 {
		e.Errors = append(e.Errors, fmt.Sprintf(format, args...))
	}
}

func (e *sqlReport) violations() []string {
	var v []string
	if e.Timeline.Samples == 0 {
		v = append(v, "sql: no sample of the table: the timeline checks checked nothing")
	}
	rw := e.Rows
	if n := rw.TokenBack + rw.HolderAboveRow + rw.NewNotAbove + rw.Reappeared + rw.Exclusion + rw.WriterShared + rw.SemOver + rw.KindMismatch + rw.OverBound + rw.MarkedLive + rw.Unreadable; n > 0 {
		v = append(v, fmt.Sprintf("sql: %d rows' states the store may not write (tokens back %d, holders above the row's token %d, new holders not above it %d, holders gone and back %d, exclusive kinds held twice %d, writers beside another holder %d, semaphores above capacity %d, kinds mixed %d, leases or places above their bound %d, abandoned owners live %d, unreadable %d): %v",
			n, rw.TokenBack, rw.HolderAboveRow, rw.NewNotAbove, rw.Reappeared, rw.Exclusion, rw.WriterShared, rw.SemOver, rw.KindMismatch, rw.OverBound, rw.MarkedLive, rw.Unreadable, rw.Detail))
	}
	if n := e.Tokens.OtherOwner; n > 0 {
		v = append(v, fmt.Sprintf("sql: %d acquisitions whose token a sample showed held by another owner: %v", n, e.Tokens.Detail))
	}
	if n := e.Holders.OtherToken; n > 0 {
		v = append(v, fmt.Sprintf("sql: %d holders with another token than their owner's acquisition requests were told: %v", n, e.Holders.Detail))
	}
	if n := e.LossSignal.Late; n > 0 {
		v = append(v, fmt.Sprintf("sql: %d losses signalled after a sample showed the lock held by another owner: %v", n, e.LossSignal.Detail))
	}
	if g := e.GiveUp; g.TakenAfter+g.LeftAfter > 0 {
		v = append(v, fmt.Sprintf("sql: give-ups: %d owners of a failed call made holders or placed after it returned, %d still there after it: %v", g.TakenAfter, g.LeftAfter, g.Detail))
	}
	if e.Orphans.Left > 0 {
		v = append(v, fmt.Sprintf("sql: %d live holders and places left after the clients closed and every lease could have run out", e.Orphans.Left))
	}
	if len(e.Errors) > 0 {
		v = append(v, fmt.Sprintf("sql: harness: %q", e.Errors))
	}
	return v
}

func (e *sqlReport) log(t *testing.T) {
	t.Logf("sql (%s): kinds %v (listed but unsupported %v, served but not listed %v); multi-mutex calls %d, %d acquired",
		e.Flavor, e.Kinds, e.Unsupported, e.NowServed, e.Multi.Calls, e.Multi.Acquired)
	for _, f := range e.Faults {
		t.Logf("sql fault: %s", f)
	}
	tl := e.Timeline
	t.Logf("sql timeline: %d samples of the table (%d reads failed, %d reconnections of PostgreSQL's sampler, longest gap %.0f ms), %d row states, %d holders",
		tl.Samples, tl.FailedReads, tl.Reconnects, tl.LongestGapMs, tl.RowVersions, tl.Holders)
	rw := e.Rows
	t.Logf("sql rows: tokens back %d, holders above the row's token %d, new holders not above the previous token %d, holders gone and back %d (%d across a server kill, counted); exclusive kinds held twice %d, writers beside another holder %d, semaphores above capacity %d, kinds mixed %d, above their bound %d, abandoned owners live %d, states unreadable %d (all must be 0)",
		rw.TokenBack, rw.HolderAboveRow, rw.NewNotAbove, rw.Reappeared, rw.ReappearedAfterKill, rw.Exclusion, rw.WriterShared, rw.SemOver, rw.KindMismatch, rw.OverBound, rw.MarkedLive, rw.Unreadable)
	tk := e.Tokens
	t.Logf("sql tokens: %d acquisitions checked against the holders sampled: %d held by one of the call's owners, %d held by another owner (must be 0), %d not sampled",
		tk.Checked, tk.Matched, tk.OtherOwner, tk.NotSampled)
	h := e.Holders
	t.Logf("sql holders: %d seen: %d with their call's token, %d of another attempt of a call that succeeded, %d of calls that failed, %d tied to no call; %d with another token than their owner's requests were told (must be 0)",
		h.Seen, h.Matched, h.OtherAttempt, h.OfFailedCall, h.Unlinked, h.OtherToken)
	ls := e.LossSignal
	t.Logf("sql loss signal: %d losses, %d checked: %d certainly before another owner held, %d certainly after (must be 0), %d undecided, %d never taken by another in the samples; excluded %d paused, %d never handed out, %d of shared kinds; against the lease end (sampled after the signal): %d leads, min %.1f ms, median %.1f ms, %d signalled after it (not asserted)",
		ls.Losses, ls.Checked, ls.First, ls.Late, ls.Undecided, ls.NotTaken, ls.ExcludedPaused, ls.NeverHandedOut, ls.Shared, ls.SampledLeads, ls.MinLeadMs, ls.MedianLeadMs, ls.AfterSampledEnd)
	for _, d := range ls.AfterSampledEndDetail {
		t.Logf("sql loss signalled after the lease end: %s", d)
	}
	g := e.GiveUp
	t.Logf("sql give-ups: %d owners of acquisition requests (%d tied to no call, %d to successful calls); %d of failed calls checked (%d left out: a clean-up or other request failed by the return): %d made holders or placed after the return, %d still there after it (must be 0); %d seen after the return excused (their abandonment not confirmed by it)",
		g.Owners, g.Unlinked, g.OfSuccesses, g.Checked, g.ExcludedCleanup, g.TakenAfter, g.LeftAfter, g.Unconfirmed)
	o := e.Orphans
	t.Logf("sql orphans: %d live holders and places when the clients had closed, gone after %s, %d left (must be 0); %d live abandonment marks", o.AtClose, o.Waited, o.Left, o.Marks)
	if len(e.Errors) > 0 {
		t.Logf("sql harness errors: %q", e.Errors)
	}
}

// kindName is the store's name of the lock kind of name (the row's kind
// while it is in use).
func (r *chaosRun) sqlKindName(name string) string {
	return map[string]string{"plain": "mutex", "fair": "fair-mutex", "elect": "election", "rw": "rwmutex", "sem": "semaphore"}[r.kindOf(name)]
}

// killBetween says whether a server kill overlapped [from, to].
func (r *chaosRun) killBetween(from, to int64) bool {
	for _, f := range r.faults {
		if f.Kind == faultSQLKill && f.Start < to && f.End > from {
			return true
		}
	}
	return false
}

// checkSQL runs the checks on the SQL timeline (see the top of this file)
// with the histories: the acquisitions by name, the losses, and the
// requests the clients recorded (enq, abf, abok, rpcerr).
func (r *chaosRun) checkSQL(rep *chaosReport, byName map[string][]*acquisition, losses []record, byToken map[string]*acquisition, reqs []record) {
	s := r.sql
	e := &s.report
	for _, f := range r.faults {
		switch f.Kind {
		case faultSQLKill, faultSQLPause, faultSQLCutOff, faultSQLReset:
			e.Faults = append(e.Faults, fmt.Sprintf("%s at %.1fs: %s", f.Kind, float64(f.Start-r.start)/1e9, f.Detail))
		}
	}
	tl := s.tl
	tl.mu.Lock()
	defer tl.mu.Unlock()
	samples := tl.samples
	e.Timeline.Samples, e.Timeline.FailedReads, e.Timeline.Reconnects = len(samples), tl.failed, tl.reconnects
	e.Rows.Unreadable = len(tl.unreadable)
	for _, u := range tl.unreadable {
		appendDetail(&e.Rows.Detail, "unreadable state: %s", u)
	}
	for i := 1; i < len(samples); i++ {
		e.Timeline.LongestGapMs = max(e.Timeline.LongestGapMs, float64(samples[i].Recv-samples[i-1].Recv)/1e6)
	}
	ids := map[string]string{} // owner -> placeID
	idOf := func(owner string) string {
		id, ok := ids[owner]
		if !ok {
			id = placeID(owner)
			ids[owner] = id
		}
		return id
	}

	// The rows, sample by sample; the holders; the owners' live samples.
	type holderKey struct {
		name  string
		token uint64
	}
	type seenHolder struct {
		owner       string
		first, last int   // the first and last samples that showed it
		maxUntil    int64 // its latest lease end sampled (µs, the database's clock)
	}
	holders := map[holderKey]*seenHolder{}
	liveAt := map[string][]int{} // placeID -> the samples that showed it live (a holder or a place)
	rowsCheck := &e.Rows
	bad := func(n *int, format string, args ...any) {
		*n++
		appendDetail(&rowsCheck.Detail, format, args...)
	}
	maxQueue := time.Duration(0)
	for _, name := range r.names {
		maxQueue = max(maxQueue, r.queueTimeout(name))
	}
	const slack = int64(50 * time.Millisecond / time.Microsecond)
	holdBound, placeBound := int64(3*r.lease/time.Microsecond)+slack, int64(maxQueue/time.Microsecond)+slack
	markBound := int64(store.AbandonFor(3*r.lease)/time.Microsecond) + slack
	versions := map[*sqlRow]bool{}
	for i, sm := range samples {
		var prev *sqlSample
		if i > 0 {
			prev = &samples[i-1]
		}
		for _, name := range r.names {
			row := sm.Rows[name]
			if row == nil {
				continue
			}
			versions[row] = true
			var prow *sqlRow
			if prev != nil {
				prow = prev.Rows[name]
			}
			at := float64(sm.Send-r.start) / 1e9
			if prow != nil && row.Token < prow.Token {
				bad(&rowsCheck.TokenBack, "%s: token %d at %.3fs, %d in the sample before", name, row.Token, at, prow.Token)
			}
			if kind := r.sqlKindName(name); row.Kind != "" && row.Kind != kind {
				bad(&rowsCheck.KindMismatch, "%s: kind %q at %.3fs, the name's is %q", name, row.Kind, at, kind)
			}
			live, writers, permits := 0, 0, 0
			for _, h := range row.Holders {
				k := holderKey{name, h.Token}
				if h.Token > row.Token {
					bad(&rowsCheck.HolderAboveRow, "%s: holder token %d above the row's %d at %.3fs", name, h.Token, row.Token, at)
				}
				sh := holders[k]
				inPrev := prow != nil && slices.ContainsFunc(prow.Holders, func(p sqlHolder) bool { return p.Token == h.Token })
				switch {
				case sh == nil && prow != nil && h.Token <= prow.Token:
					if r.killBetween(prev.Recv, sm.Send) {
						rowsCheck.ReappearedAfterKill++
					} else {
						bad(&rowsCheck.NewNotAbove, "%s: holder token %d first seen at %.3fs, not above the row's %d in the sample before", name, h.Token, at, prow.Token)
					}
				case sh != nil && !inPrev && prow != nil:
					if r.killBetween(prev.Recv, sm.Send) {
						rowsCheck.ReappearedAfterKill++
					} else {
						bad(&rowsCheck.Reappeared, "%s: holder token %d (owner %s) back at %.3fs, gone in the sample before", name, h.Token, idOf(h.Owner), at)
					}
				}
				if sh == nil {
					sh = &seenHolder{owner: h.Owner, first: i}
					holders[k] = sh
				}
				sh.maxUntil, sh.last = max(sh.maxUntil, h.Until), i
				if h.Until <= sm.Now {
					continue
				}
				live++
				permits += max(h.Permits, 1)
				if h.Writer {
					writers++
				}
				if h.Until-sm.Now > holdBound {
					bad(&rowsCheck.OverBound, "%s: holder token %d's lease ends %v after the sample at %.3fs", name, h.Token, time.Duration(h.Until-sm.Now)*time.Microsecond, at)
				}
				if row.Marks[h.Owner] > sm.Now {
					bad(&rowsCheck.MarkedLive, "%s: holder token %d (owner %s) live at %.3fs with its abandonment mark live", name, h.Token, idOf(h.Owner), at)
				}
				id := idOf(h.Owner)
				if l := liveAt[id]; len(l) == 0 || l[len(l)-1] != i {
					liveAt[id] = append(l, i)
				}
			}
			for _, p := range row.Queue {
				if p.Until <= sm.Now {
					continue
				}
				if p.Until-sm.Now > placeBound {
					bad(&rowsCheck.OverBound, "%s: a place (owner %s) ends %v after the sample at %.3fs", name, idOf(p.Owner), time.Duration(p.Until-sm.Now)*time.Microsecond, at)
				}
				if row.Marks[p.Owner] > sm.Now {
					bad(&rowsCheck.MarkedLive, "%s: a place (owner %s) live at %.3fs with its abandonment mark live", name, idOf(p.Owner), at)
				}
				id := idOf(p.Owner)
				if l := liveAt[id]; len(l) == 0 || l[len(l)-1] != i {
					liveAt[id] = append(l, i)
				}
			}
			for o, until := range row.Marks {
				if until-sm.Now > markBound {
					bad(&rowsCheck.OverBound, "%s: an abandonment mark (owner %s) ends %v after the sample at %.3fs", name, idOf(o), time.Duration(until-sm.Now)*time.Microsecond, at)
				}
			}
			switch r.kindOf(name) {
			case "rw":
				if writers > 0 && live > 1 {
					bad(&rowsCheck.WriterShared, "%s: %d live holders, %d writing, at %.3fs", name, live, writers, at)
				}
			case "sem":
				capacity := row.Capacity
				if capacity == 0 {
					capacity = r.sem[name]
				}
				if permits > capacity {
					bad(&rowsCheck.SemOver, "%s: %d permits held live at %.3fs, capacity %d", name, permits, at, capacity)
				}
			default:
				if live > 1 {
					bad(&rowsCheck.Exclusion, "%s: %d live holders at %.3fs", name, live, at)
				}
			}
		}
	}
	e.Timeline.RowVersions, e.Timeline.Holders = len(versions), len(holders)

	// The acquisition requests, by owner (placeID): the first, and the
	// calls they are for.
	oc := tieOwners(byName, reqs)
	e.Multi.Calls, e.Multi.Acquired = oc.multiCalls, oc.multiAcquired

	// Tokens: a sampled holder of an acquisition's token is one of its
	// call's owners.
	for name, as := range byName {
		for _, a := range as {
			if !a.ok() {
				continue
			}
			e.Tokens.Checked++
			sh := holders[holderKey{name, a.acq.Token}]
			switch {
			case sh == nil:
				e.Tokens.NotSampled++
			case slices.Contains(oc.placesOf[a], idOf(sh.owner)):
				e.Tokens.Matched++
			case len(oc.placesOf[a]) == 0:
				e.Tokens.NotSampled++ // its requests were not tied to it (a killed process)
			default:
				e.Tokens.OtherOwner++
				appendDetail(&e.Tokens.Detail, "%s token %d (owner %d, client %d): sampled held by owner %s, not one of the call's %v",
					name, a.acq.Token, a.acq.Owner, a.proc.id, idOf(sh.owner), oc.placesOf[a])
			}
		}
	}

	// Holders: each against what its owner's requests were told, and
	// against its owner's call.
	told := map[string][]uint64{} // placeID -> the tokens its acquisition requests were told
	for _, q := range reqs {
		if q.K == "enq" && q.Res == "acquired" {
			told[q.Place] = append(told[q.Place], q.Token)
		}
	}
	hs := &e.Holders
	keys := make([]holderKey, 0, len(holders))
	for k := range holders {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b holderKey) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	for _, k := range keys {
		if !slices.Contains(r.names, k.name) {
			continue
		}
		sh := holders[k]
		hs.Seen++
		id := idOf(sh.owner)
		q, ok := oc.first[id]
		var a *acquisition
		if ok && q.Owner != 0 {
			a = oc.calls[callKey{q.Owner, q.Name}]
		}
		if t := told[id]; len(t) > 0 && !slices.Contains(t, k.token) {
			hs.OtherToken++
			appendDetail(&hs.Detail, "%s: holder token %d (owner %s, first seen at %.3fs), its owner's acquisition requests told %v",
				k.name, k.token, id, float64(samples[sh.first].Send-r.start)/1e9, t)
			continue
		}
		switch {
		case a == nil:
			hs.Unlinked++
		case !a.ok():
			hs.OfFailedCall++
		case a.acq.Token == k.token:
			hs.Matched++
		default:
			// An owner of an earlier attempt of the call (its outcome
			// unknown, or a MultiMutex member taken in a step of its own
			// before another was refused: given up), or a queued kind's
			// grant its waiter never heard of, then its place again.
			hs.OtherAttempt++
		}
	}

	// The loss signal, against the first sample that showed another
	// owner holding the lock.
	ls := &e.LossSignal
	ls.Losses = len(losses)
	var leads []float64
	for _, l := range losses {
		if r.isShared(l.Name) {
			ls.Shared++
			continue
		}
		a := byToken[holdKey(l.Name, l.Token)]
		if a == nil {
			ls.NeverHandedOut++
			continue
		}
		believed := l.T
		if a.rel != nil && a.rel.Call < believed {
			believed = a.rel.Call
		}
		if a.proc.pausedDuring(a.acq.Call, believed) {
			ls.ExcludedPaused++
			continue
		}
		ls.Checked++
		if sh := holders[holderKey{l.Name, l.Token}]; sh != nil && l.Wall != 0 && samples[sh.last].Send >= l.T {
			lead := float64(sh.maxUntil*1000-l.Wall) / 1e6
			ls.SampledLeads++
			if lead < 0 {
				ls.AfterSampledEnd++
				appendDetail(&ls.AfterSampledEndDetail, "%s token %d (client %d, %s): acquired [%.3fs, %.3fs], loss signalled at %.3fs (%q), %.1f ms after the lease end; samples showed it from %.3fs to %.3fs",
					l.Name, l.Token, l.Client, r.kindOf(l.Name), float64(a.acq.Call-r.start)/1e9, float64(a.acq.Ret-r.start)/1e9, float64(l.T-r.start)/1e9, l.Err, -lead,
					float64(samples[sh.first].Send-r.start)/1e9, float64(samples[sh.last].Send-r.start)/1e9)
			}
			leads = append(leads, lead)
		}
		from := sort.Search(len(samples), func(i int) bool { return samples[i].Send >= a.acq.Call })
		other := -1
		for i := from; i < len(samples) && other < 0; i++ {
			if row := samples[i].Rows[l.Name]; row != nil {
				for _, h := range row.Holders {
					if h.Token > l.Token && h.Until > samples[i].Now {
						other = i
						break
					}
				}
			}
		}
		switch {
		case other < 0:
			ls.NotTaken++
		case samples[other].Recv <= believed:
			ls.Late++
			appendDetail(&ls.Detail, "%s token %d (client %d): signalled at %.3fs (%q), another owner's holding sampled by %.3fs",
				l.Name, l.Token, l.Client, float64(believed-r.start)/1e9, l.Err, float64(samples[other].Recv-r.start)/1e9)
		case other > 0 && samples[other-1].Send >= believed:
			ls.First++
		default:
			ls.Undecided++
		}
	}
	if len(leads) > 0 {
		slices.Sort(leads)
		ls.MinLeadMs, ls.MedianLeadMs = leads[0], leads[len(leads)/2]
	}

	// Give-ups: nothing of a failed call's owners live in a sample sent
	// after it returned.
	g := &e.GiveUp
	for _, id := range oc.ids() {
		g.Owners++
		a, verdict, after, unconfirmed := oc.giveUp(id)
		switch verdict {
		case giveUpUnlinked:
			g.Unlinked++
			continue
		case giveUpSuccess:
			g.OfSuccesses++
			continue
		case giveUpCleanup:
			g.ExcludedCleanup++
			continue
		}
		g.Checked++
		l := liveAt[id]
		j := sort.Search(len(l), func(j int) bool { return samples[l[j]].Send >= after })
		if j == len(l) {
			continue
		}
		sm := samples[l[j]]
		switch {
		case unconfirmed:
			g.Unconfirmed++
		case j > 0 && l[j-1] == l[j]-1:
			g.LeftAfter++
			appendDetail(&g.Detail, "%s: owner %s of client %d's call (owner %d, %s, returned at %.3fs) live in the sample sent at %.3fs, after the return",
				a.acq.Name, id, a.proc.id, a.acq.Owner, a.acq.Err, float64(a.acq.Ret-r.start)/1e9, float64(sm.Send-r.start)/1e9)
		default:
			g.TakenAfter++
			appendDetail(&g.Detail, "%s: owner %s of client %d's call (owner %d, %s, returned at %.3fs) made live again in the sample sent at %.3fs, after the return",
				a.acq.Name, id, a.proc.id, a.acq.Owner, a.acq.Err, float64(a.acq.Ret-r.start)/1e9, float64(sm.Send-r.start)/1e9)
		}
	}
}

// sqlHolder is a holder in a row's state, as the checks read it.
type sqlHolder struct {
	Owner   string // secret: kept in memory, reported as its placeID
	Token   uint64
	Until   int64 // µs, the database's clock
	PID     int
	Permits int
	Writer  bool // a hold of a read-write lock's write side
}

// sqlPlace is a place in a row's queue.
type sqlPlace struct {
	Owner string
	Until int64
	PID   int
}

// sqlRow is one state of a row.
type sqlRow struct {
	Token    uint64
	Kind     string
	Holders  []sqlHolder
	Queue    []sqlPlace
	Marks    map[string]int64 // owner -> the mark's end
	Capacity int
}

// live counts the row's live holders and places at now.
func (w *sqlRow) live(now int64) int {
	n := 0
	for _, h := range w.Holders {
		if h.Until > now {
			n++
		}
	}
	for _, p := range w.Queue {
		if p.Until > now {
			n++
		}
	}
	return n
}

// decodeSQLRow reads a row's state column (sqlstore's lockState, JSON).
func decodeSQLRow(token uint64, state string) (*sqlRow, error) {
	var st struct {
		Kind    string `json:"kind"`
		Holders []struct {
			Owner   string `json:"owner"`
			Token   uint64 `json:"token"`
			Permits int    `json:"permits"`
			Until   int64  `json:"until"`
			PID     int    `json:"pid"`
			Holds   []struct {
				Side byte `json:"side"`
			} `json:"holds"`
		} `json:"holders"`
		Queue []struct {
			Owner string `json:"owner"`
			Until int64  `json:"until"`
			PID   int    `json:"pid"`
		} `json:"queue"`
		Marks    map[string]int64 `json:"marks"`
		Capacity int              `json:"capacity"`
	}
	if state != "" {
		if err := json.Unmarshal([]byte(state), &st); err != nil {
			return nil, err
		}
	}
	w := &sqlRow{Token: token, Kind: st.Kind, Marks: st.Marks, Capacity: st.Capacity}
	for _, h := range st.Holders {
		x := sqlHolder{Owner: h.Owner, Token: h.Token, Until: h.Until, PID: h.PID, Permits: h.Permits}
		for _, hd := range h.Holds {
			x.Writer = x.Writer || hd.Side == 'w'
		}
		w.Holders = append(w.Holders, x)
	}
	for _, p := range st.Queue {
		w.Queue = append(w.Queue, sqlPlace{Owner: p.Owner, Until: p.Until, PID: p.PID})
	}
	return w, nil
}

// A sqlSample is one read of the whole table: sent at Send, its reply at
// Recv (CLOCK_MONOTONIC), the database's clock Now (µs) and the rows by
// name (a row unchanged since the sample before is the same *sqlRow).
type sqlSample struct {
	Send, Recv, Now int64
	Rows            map[string]*sqlRow
}

// sqlRawRow is a row as the sampler read it.
type sqlRawRow struct {
	name  string
	token uint64
	state string
}

// sqlTimeline is the server's timeline of the SQL mode: the samples of
// the table.
type sqlTimeline struct {
	read   func(ctx context.Context) (now int64, rows []sqlRawRow, err error)
	close  func()
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once

	mu         sync.Mutex
	samples    []sqlSample
	failed     int
	reconnects int
	err        error    // the last failed read's
	unreadable []string // rows whose state is not JSON the checks can read
	changed    chan struct{}
}

// startSQLTimeline starts the sampler on a connection of its own to the
// server of dsn.
func startSQLTimeline(flavor, dsn string) *sqlTimeline {
	tl := &sqlTimeline{changed: make(chan struct{})}
	tl.ctx, tl.cancel = context.WithCancel(context.Background())
	table := sqlstore.DefaultTable
	switch flavor {
	case sqlMariaDB:
		quietMySQLLogs()
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			panic(err)
		}
		db.SetMaxOpenConns(1)
		tl.close = func() { db.Close() }
		q := `SELECT c.now, t.name, t.token, t.state FROM (SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) AS now) c LEFT JOIN ` + table + ` t ON 1 = 1`
		tl.read = func(ctx context.Context) (int64, []sqlRawRow, error) {
			rows, err := db.QueryContext(ctx, q)
			if err != nil {
				return 0, nil, err
			}
			defer rows.Close()
			var now int64
			var out []sqlRawRow
			for rows.Next() {
				var name []byte
				var token sql.NullInt64
				var state sql.NullString
				if err := rows.Scan(&now, &name, &token, &state); err != nil {
					return 0, nil, err
				}
				if name != nil {
					out = append(out, sqlRawRow{string(name), uint64(token.Int64), state.String})
				}
			}
			return now, out, rows.Err()
		}
	default:
		var conn *pgx.Conn
		tl.close = func() {
			if conn != nil {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_ = conn.Close(ctx)
				cancel()
			}
		}
		q := `SELECT c.now, t.name, t.token, t.state FROM (SELECT (extract(epoch from clock_timestamp()) * 1000000)::bigint AS now) c LEFT JOIN ` + table + ` t ON true`
		tl.read = func(ctx context.Context) (int64, []sqlRawRow, error) {
			if conn == nil || conn.IsClosed() {
				c, err := pgx.Connect(ctx, dsn)
				if err != nil {
					return 0, nil, err
				}
				if conn != nil {
					tl.mu.Lock()
					tl.reconnects++
					tl.mu.Unlock()
				}
				conn = c
			}
			rows, err := conn.Query(ctx, q)
			if err != nil {
				return 0, nil, err
			}
			defer rows.Close()
			var now int64
			var out []sqlRawRow
			for rows.Next() {
				var name, state *string
				var token *int64
				if err := rows.Scan(&now, &name, &token, &state); err != nil {
					return 0, nil, err
				}
				if name != nil && token != nil && state != nil {
					out = append(out, sqlRawRow{*name, uint64(*token), *state})
				}
			}
			if err := rows.Err(); err != nil {
				_ = conn.Close(context.Background()) // a read cut short: connect again
				return 0, nil, err
			}
			return now, out, nil
		}
	}
	tl.wg.Add(1)
	go func() { defer tl.wg.Done(); tl.sample() }()
	return tl
}

func (tl *sqlTimeline) stop() {
	tl.once.Do(func() {
		tl.cancel()
		tl.wg.Wait()
		tl.close()
	})
}

// sample reads the table every sqlSampleEvery until the timeline stops.
func (tl *sqlTimeline) sample() {
	tick := time.NewTicker(sqlSampleEvery)
	defer tick.Stop()
	last := map[string]struct {
		token uint64
		state string
		row   *sqlRow
	}{}
	var prev map[string]*sqlRow
	for {
		select {
		case <-tl.ctx.Done():
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(tl.ctx, time.Second)
		send := mono()
		now, raws, err := tl.read(ctx)
		recv := mono()
		cancel()
		if err != nil {
			tl.mu.Lock()
			tl.failed++
			tl.err = err
			tl.mu.Unlock()
			continue
		}
		rows := make(map[string]*sqlRow, len(raws))
		same := len(raws) == len(prev)
		for _, raw := range raws {
			l, ok := last[raw.name]
			if !ok || l.token != raw.token || l.state != raw.state {
				row, err := decodeSQLRow(raw.token, raw.state)
				if err != nil {
					tl.mu.Lock()
					tl.err = fmt.Errorf("row %q: %w", raw.name, err)
					// The state itself is not reported: it names owners (secrets).
					tl.unreadable = append(tl.unreadable, fmt.Sprintf("%s (token %d, %d bytes): %v", raw.name, raw.token, len(raw.state), err))
					tl.mu.Unlock()
					continue
				}
				l.token, l.state, l.row = raw.token, raw.state, row
				last[raw.name] = l
			}
			rows[raw.name] = l.row
			same = same && prev[raw.name] == l.row
		}
		if same {
			rows = prev
		}
		prev = rows
		tl.mu.Lock()
		tl.samples = append(tl.samples, sqlSample{Send: send, Recv: recv, Now: now, Rows: rows})
		close(tl.changed)
		tl.changed = make(chan struct{})
		tl.mu.Unlock()
	}
}

// changes returns a channel closed at the next sample.
func (tl *sqlTimeline) changes() <-chan struct{} {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.changed
}

// last returns the last sample, if any.
func (tl *sqlTimeline) last() (sqlSample, bool) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if len(tl.samples) == 0 {
		return sqlSample{}, false
	}
	return tl.samples[len(tl.samples)-1], true
}

// lastErr returns the last failed read's error.
func (tl *sqlTimeline) lastErr() error {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.err
}

// awaitSample waits until the sampler has read the table once, for d at
// most, and reports whether it did.
func (tl *sqlTimeline) awaitSample(d time.Duration) bool {
	deadline := time.After(d)
	for {
		changed := tl.changes()
		if _, ok := tl.last(); ok {
			return true
		}
		select {
		case <-changed:
		case <-deadline:
			return false
		}
	}
}
