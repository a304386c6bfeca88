// Command sqlbench benchmarks distlock's SQL store (sqlstore) against SQL
// lock libraries in one invocation, on a PostgreSQL and a MariaDB server
// that it starts itself (package sqltest: free loopback ports, never the
// machine's own services), and prints a markdown report with ratios to
// the baseline of each database (pg_advisory_lock on PostgreSQL,
// go-mysql-lock on MariaDB) in the same run. See ../../README.md.
//
//	go run ./cmd/sqlbench                          # a, b, c, e; 5 runs
//	go run ./cmd/sqlbench -runs 3 -duration 2s -out ../docs/benchmarks.md
//	go run ./cmd/sqlbench -scenarios d             # diagnostic: the commit's share of (a)
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/distlock/distlock/bench/internal/harness"
	"github.com/distlock/distlock/bench/internal/sqlbench"
	"github.com/distlock/distlock/sqltest"
)

type config struct {
	runs       int
	duration   time.Duration
	parallel   int
	clients    int
	goroutines int
	hold       time.Duration
	rounds     int
	pause      time.Duration
	cap        time.Duration
	libs       []string
	scenarios  []string
}

func main() {
	var c config
	flag.IntVar(&c.runs, "runs", 5, "runs; the report shows medians, and ratios as medians of per-run ratios")
	flag.DurationVar(&c.duration, "duration", time.Second, "time per library per run of a, b, c and d")
	flag.IntVar(&c.parallel, "parallel", 32, "goroutines of b, each on a name of its own")
	flag.IntVar(&c.clients, "clients", 4, "clients (a pool and a lock client of their own) of c")
	flag.IntVar(&c.goroutines, "goroutines", 4, "goroutines per client of c")
	flag.DurationVar(&c.hold, "hold", 100*time.Microsecond, "time in the critical section in c")
	flag.IntVar(&c.rounds, "rounds", 20, "hand-overs per library per run of e")
	flag.DurationVar(&c.pause, "pause", 20*time.Millisecond, "in e, how long the holder keeps the lock once the waiter waits")
	flag.DurationVar(&c.cap, "cap", 2*time.Second, fmt.Sprintf("in e, a hand-over that takes longer is cancelled and counted as this; after %d such rounds a library's other rounds of the run are skipped (pglock's waiter sleeps a lease, 30 s, between attempts)", sqlbench.CapLimit))
	scen := flag.String("scenarios", "a,b,c,e", "scenarios, comma-separated: a, b, c, e; d (diagnostic: the commit's share of a, on servers with other commit settings) runs only when named")
	libsFlag := flag.String("libs", strings.Join(sqlbench.Libs, ","), "libraries (the baseline of each library's database, advisory or mysqllock, always runs)")
	out := flag.String("out", "", "markdown file to write the report into (between <!-- sqlbench:begin/end --> markers)")
	pin := flag.Bool("pin", true, "pin the database servers to the last CPU and this process to the others")
	timeout := flag.Duration("timeout", 40*time.Minute, "hard limit for the whole invocation")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the clients (this process, not the servers) to this file")
	flag.Parse()
	stop, err := harness.StartCPUProfile(*cpuProfile)
	if err != nil {
		fatal(err)
	}
	defer stop()
	for _, l := range harness.SplitList(*libsFlag) {
		if !slices.Contains(sqlbench.Libs, l) {
			fatal(fmt.Errorf("unknown library %q (want some of %s)", l, strings.Join(sqlbench.Libs, ",")))
		}
		c.libs = append(c.libs, l, sqlbench.Baseline(l))
	}
	// Report order, without duplicates.
	c.libs = slices.DeleteFunc(slices.Clone(sqlbench.Libs), func(l string) bool { return !slices.Contains(c.libs, l) })
	for _, s := range harness.SplitList(*scen) {
		if !slices.Contains([]string{"a", "b", "c", "d", "e"}, s) {
			fatal(fmt.Errorf("unknown scenario %q", s))
		}
		c.scenarios = append(c.scenarios, s)
	}
	if c.runs < 1 || c.rounds < 1 || c.duration <= 0 || c.parallel < 1 || c.clients < 1 || c.goroutines < 1 || c.cap <= 0 {
		fatal(errors.New("-runs, -rounds, -duration, -parallel, -clients, -goroutines and -cap must be positive"))
	}
	if len(c.libs) == 0 && c.has("a", "b", "c", "e") {
		fatal(errors.New("no library"))
	}

	serverCPUs, err := harness.PinServers(*pin)
	if err != nil {
		fatal(err)
	}
	harness.StopOnSignalOrTimeout(*timeout, stopAll)

	inv := harness.NewInvocation("sqlbench")
	w := inv.W
	var versions []string
	if c.has("a", "b", "c", "e") {
		pg := slices.ContainsFunc(c.libs, func(l string) bool { return sqlbench.Server(l) == "postgres" })
		maria := slices.ContainsFunc(c.libs, func(l string) bool { return sqlbench.Server(l) == "mariadb" })
		srv := startServers(pg, maria, serverCPUs)
		versions = srv.Versions()
		r := runMain(c, srv)
		stopServers(srv)
		report(w, c, r)
	}
	if c.has("d") {
		if v := diagnostic(w, c, serverCPUs); versions == nil {
			versions = v
		}
	}
	w("%s\n", machine(c, inv.Load0, harness.LoadAvg(), time.Since(inv.Start), serverCPUs, versions))
	if err := inv.Print(*out, sqlbench.Splice); err != nil {
		fatal(err)
	}
}

// has reports whether any of scens is to run.
func (c config) has(scens ...string) bool { return harness.HasAny(c.scenarios, scens...) }

var (
	serversMu sync.Mutex
	servers   []*sqlbench.Servers
)

func startServers(pg, maria bool, cpus []int, pgOpts ...sqltest.Option) *sqlbench.Servers {
	harness.Logf("starting servers (PostgreSQL %v, MariaDB %v)…", pg, maria)
	s, err := sqlbench.StartServers(pg, maria, cpus, pgOpts...)
	if err != nil {
		fatal(err)
	}
	serversMu.Lock()
	servers = append(servers, s)
	serversMu.Unlock()
	return s
}

func stopServers(s *sqlbench.Servers) {
	if err := s.Stop(); err != nil {
		harness.Logf("stopping servers: %v", err)
	}
	serversMu.Lock()
	servers = slices.DeleteFunc(servers, func(x *sqlbench.Servers) bool { return x == s })
	serversMu.Unlock()
}

func stopAll() {
	serversMu.Lock()
	ss := servers
	servers = nil
	serversMu.Unlock()
	for _, s := range ss {
		_ = s.Stop()
	}
}

func lockers(lib string, srv *sqlbench.Servers, n, conns int) []sqlbench.Locker {
	var ls []sqlbench.Locker
	for range n {
		l, err := sqlbench.NewLocker(lib, srv.DSNs(), sqlbench.Options{Conns: conns})
		if err != nil {
			closeAll(ls)
			fatal(fmt.Errorf("%s: %w", lib, err))
		}
		ls = append(ls, l)
	}
	return ls
}

func closeAll(ls []sqlbench.Locker) {
	for _, l := range ls {
		if err := l.Close(); err != nil {
			harness.Logf("close: %v", err)
		}
	}
}

func check(err error, scen, lib string) {
	if err != nil {
		fatal(fmt.Errorf("scenario %s, %s: %w", scen, lib, err))
	}
}

// runMain runs a, b, c and e: in each run every library in turn (the
// order rotating by one each run), then e the same way.
func runMain(c config, srv *sqlbench.Servers) *harness.Results {
	r := harness.NewResults()
	meter := func(lib string) sqlbench.Meter { return func() time.Duration { return srv.CPU(lib) } }
	// One untimed pass of every library first: tables are created, and
	// the first slot on a fresh server is slow.
	for _, lib := range c.libs {
		ls := lockers(lib, srv, 1, 1)
		_, err := sqlbench.Uncontended(ls[0], "warm/"+lib+"/", 1, c.duration/2, meter(lib))
		closeAll(ls)
		check(err, "warm-up", lib)
	}
	for run := range c.runs {
		for _, lib := range harness.Rotated(c.libs, run) {
			p := fmt.Sprintf("r%d/%s/", run, lib)
			for _, sc := range []string{"a", "b"} {
				if !c.has(sc) {
					continue
				}
				g := 1
				if sc == "b" {
					g = c.parallel
				}
				ls := lockers(lib, srv, 1, g)
				rt, err := sqlbench.Uncontended(ls[0], p+sc+"/", g, c.duration, meter(lib))
				closeAll(ls)
				check(err, sc, lib)
				r.Add(sc, lib, "ops", rt.PerS())
				r.Add(sc, lib, "scpu", rt.ServerPerPair())
				r.Add(sc, lib, "ccpu", rt.ClientPerPair())
				harness.Logf("%s run %d %-17s %8.0f pairs/s, CPU per pair: server %.0f µs, client %.0f µs", sc, run+1, lib, rt.PerS(), rt.ServerPerPair(), rt.ClientPerPair())
			}
			if c.has("c") {
				ls := lockers(lib, srv, c.clients, c.goroutines)
				cr, err := sqlbench.Contended(ls, c.goroutines, p+"c", c.hold, c.duration, meter(lib))
				closeAll(ls)
				check(err, "c", lib)
				r.Add("c", lib, "changes", cr.ChangesPerS)
				r.Add("c", lib, "acq", cr.AcqPerS)
				r.Add("c", lib, "jain", cr.Jain)
				r.Add("c", lib, "viol", float64(cr.Violations))
				r.Add("c", lib, "lost", float64(cr.Acquisitions-cr.Counter))
				r.Add("c", lib, "cancelled", float64(cr.Cancelled))
				r.Add("c", lib, "hold", float64(cr.HoldMean)/1e6)
				r.Add("c", lib, "scpu", cr.ServerPerAcq())
				r.Add("c", lib, "ccpu", cr.ClientPerAcq())
				harness.Logf("c run %d %-17s %8.0f changes/s %8.0f acq/s Jain %.3f violations %d lost increments %d cancelled %d, CPU per acquisition: server %.0f µs, client %.0f µs",
					run+1, lib, cr.ChangesPerS, cr.AcqPerS, cr.Jain, cr.Violations, cr.Acquisitions-cr.Counter, cr.Cancelled, cr.ServerPerAcq(), cr.ClientPerAcq())
			}
		}
		if c.has("e") {
			for _, lib := range harness.Rotated(c.libs, run) {
				ls := lockers(lib, srv, 2, 1)
				hr, err := sqlbench.Handover(ls[0], ls[1], fmt.Sprintf("r%d/%s/e/", run, lib), c.rounds, c.pause, c.cap)
				closeAll(ls)
				check(err, "e", lib)
				ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
				r.Add("e", lib, "p50", ms(harness.Percentile(hr.Handovers, 50)))
				r.Add("e", lib, "p90", ms(harness.Percentile(hr.Handovers, 90)))
				r.Add("e", lib, "rel", ms(harness.Percentile(hr.Releases, 50)))
				r.Add("e", lib, "capped", float64(hr.Capped))
				r.Add("e", lib, "skipped", float64(hr.Skipped))
				harness.Logf("e run %d %-17s p50 %v p90 %v Unlock call p50 %v; %d rounds over the cap, %d skipped", run+1, lib,
					harness.Percentile(hr.Handovers, 50), harness.Percentile(hr.Handovers, 90), harness.Percentile(hr.Releases, 50), hr.Capped, hr.Skipped)
			}
		}
	}
	return r
}

func report(w func(string, ...any), c config, r *harness.Results) {
	w("Every figure is the median over %d runs (min–max); a ratio (**bold**) is the median of the per-run ratios to the baseline of the library's database in the same run: pg_advisory_lock for the PostgreSQL libraries, go-mysql-lock for distlock-mariadb. The libraries run one after the other within each run, the order rotating by one from run to run.\n\n", c.runs)
	capMs := float64(c.cap) / 1e6
	cell := func(scen, lib, metric string, f func(float64) string, ratio bool) string {
		if len(r.Values(scen, lib, metric)) == 0 {
			return "—"
		}
		v := r.Med(scen, lib, metric)
		s := f(v) + r.Spread(scen, lib, metric, f)
		capped := scen == "e" && (metric == "p50" || metric == "p90") && v >= capMs
		if capped {
			s = "≥ " + f(v) + " (capped)"
		}
		if base := sqlbench.Baseline(lib); ratio && lib != base {
			q := harness.RatioStr(r.Ratio(scen, lib, base, metric))
			if capped {
				q = "≥ " + q
			}
			s += ", **" + q + "**"
		}
		return s
	}
	var titles []string
	for _, l := range c.libs {
		titles = append(titles, sqlbench.Title(l))
	}
	line := func(name, scen, metric string, f func(float64) string, ratio bool) {
		if !c.has(scen) {
			return
		}
		w("| %s |", name)
		for _, l := range c.libs {
			w(" %s |", cell(scen, l, metric, f, ratio))
		}
		w("\n")
	}
	if c.has("a", "b", "c") {
		harness.TableHeader(w, "measure", titles)
		line("(a) 1 goroutine, one name: **pairs/s**, ÷ baseline", "a", "ops", harness.Num, true)
		line("(a) server CPU per pair: µs, ÷ baseline", "a", "scpu", harness.Num, true)
		line("(a) client CPU per pair: µs", "a", "ccpu", harness.Num, false)
		line(fmt.Sprintf("(b) %d goroutines, a name each: **pairs/s**, ÷ baseline", c.parallel), "b", "ops", harness.Num, true)
		line("(b) server CPU per pair: µs, ÷ baseline", "b", "scpu", harness.Num, true)
		line("(b) client CPU per pair: µs", "b", "ccpu", harness.Num, false)
		line(fmt.Sprintf("(c) %d clients × %d goroutines on one name, hold %v: **owner changes/s**, ÷ baseline", c.clients, c.goroutines, c.hold), "c", "changes", harness.Num, true)
		line("(c) acquisitions/s", "c", "acq", harness.Num, true)
		line("(c) **Jain** over the goroutines' acquisitions", "c", "jain", harness.Fix3, false)
		line("(c) server CPU per acquisition: µs, ÷ baseline", "c", "scpu", harness.Num, true)
		line("(c) client CPU per acquisition: µs", "c", "ccpu", harness.Num, false)
		line("(c) hold measured (ms)", "c", "hold", harness.Fix3, false)
		if c.has("c") {
			w("| (c) mutual exclusion: violations; lost increments (max over runs; must be 0) |")
			for _, l := range c.libs {
				w(" %s; %s |", harness.Count(r.Max("c", l, "viol")), harness.Count(r.Max("c", l, "lost")))
			}
			w("\n")
		}
		line(fmt.Sprintf("(c) goroutines still waiting %v after the stop, cancelled", sqlbench.Grace), "c", "cancelled", harness.Count, false)
		w("\n")
		w("(a), (b): a pair is Lock + Unlock of the goroutine's name (the same name again and again). ")
		w("CPU per pair: the server's CPU over the run (PostgreSQL: the postmaster, its exited children and its live ones, from /proc; MariaDB: mariadbd) ÷ pairs, and this process's (getrusage: the clients, and the harness's small share) ÷ pairs; /proc counts in 10 ms ticks. ")
		w("(c): an owner change is an acquisition by another goroutine than the previous holder; Jain's index is 1 when every goroutine got the same share, 1/%d when one got all. ", c.clients*c.goroutines)
		w("Exclusion is checked twice: a guard in memory that a holder enters after its Lock returns and leaves before its Unlock, and a shared counter every holder increments by a read, its hold and a write (an overlap loses an increment: the counter ends below the acquisitions). ")
		w("At the stop, goroutines that are waiting finish their acquisition (counted in the CPU per acquisition, not in the rates), or are cancelled %v later: pglock's, which sleep a lease (%v) after a failed attempt; its CPU per acquisition spreads the CPU of those %v (the server's background processes, the pools) over its few acquisitions.\n\n", sqlbench.Grace, sqlbench.PGLockLease, sqlbench.Grace)
	}
	if c.has("e") {
		harness.TableHeader(w, "measure", titles)
		line(fmt.Sprintf("(e) pause %v: **hand-over p50**, ÷ baseline (lower is better)", c.pause), "e", "p50", harness.Ms, true)
		line("(e) hand-over p90", "e", "p90", harness.Ms, true)
		line("(e) holder's Unlock call p50", "e", "rel", harness.Ms, false)
		line(fmt.Sprintf("(e) rounds over the %v cap (per run)", c.cap), "e", "capped", harness.Count, false)
		line("(e) rounds skipped (per run)", "e", "skipped", harness.Count, false)
		w("\n(e): %d hand-overs per library per run; a hand-over is the time from the **start** of the holder's Unlock call to the waiter's Lock returning, the waiter being another client (its own pool). ", c.rounds)
		w("Each round the holder takes a new name, the waiter calls Lock, and once the waiter waits (distlock: its EventWaiting; pglock: its log line for a failed attempt; pg_advisory_lock: pg_locks shows its lock ungranted; go-mysql-lock: the process list shows a session in state \"User lock\"; both polled every ms) the holder sleeps the pause and releases. ")
		w("A waiter that has not got the lock %v after the release is cancelled and the round counts as %v; after %d such rounds the library's other rounds of the run are skipped. pglock's waiter sleeps its lease (%v) after each failed attempt, so its hand-over is about the lease less the pause. No CPU figure: a round's CPU would include the pause and, for the baselines, the polls that tell the waiter waits.\n\n", c.cap, c.cap, sqlbench.CapLimit, sqlbench.PGLockLease)
	}
}

// diagnostic runs (a) for advisory, advisory-tx and distlock-pg on three
// PostgreSQL servers: sqltest's (synchronous_commit=on, fsync=off), one
// with synchronous_commit=off and one with fsync=on.
func diagnostic(w func(string, ...any), c config, cpus []int) (versions []string) {
	type setting struct {
		name string
		opts []sqltest.Option
	}
	settings := []setting{
		{"sqltest's: synchronous_commit=on, fsync=off (the headline tables' server)", nil},
		{"synchronous_commit=off", []sqltest.Option{sqltest.WithArgs("-c", "synchronous_commit=off")}},
		{"fsync=on (a commit waits for the disk, as in production)", []sqltest.Option{sqltest.WithArgs("-c", "fsync=on")}},
	}
	libs := []string{sqlbench.Advisory, sqlbench.AdvisoryTx, sqlbench.DistlockPG}
	var srvs []*sqlbench.Servers
	for _, s := range settings {
		srvs = append(srvs, startServers(true, false, cpus, s.opts...))
	}
	versions = srvs[0].Versions()
	defer func() {
		for _, s := range srvs {
			stopServers(s)
		}
	}()
	r := harness.NewResults()
	key := func(si int) string { return fmt.Sprintf("d%d", si) }
	for si, srv := range srvs {
		for _, lib := range libs {
			ls := lockers(lib, srv, 1, 1)
			_, err := sqlbench.Uncontended(ls[0], "warm/"+lib+"/", 1, c.duration/2, func() time.Duration { return srv.CPU(lib) })
			closeAll(ls)
			check(err, "d warm-up "+key(si), lib)
		}
	}
	for run := range c.runs {
		for si, srv := range srvs {
			for _, lib := range harness.Rotated(libs, run) {
				ls := lockers(lib, srv, 1, 1)
				rt, err := sqlbench.Uncontended(ls[0], fmt.Sprintf("r%d/%s/d/", run, lib), 1, c.duration, func() time.Duration { return srv.CPU(lib) })
				closeAll(ls)
				check(err, "d", lib)
				r.Add(key(si), lib, "ops", rt.PerS())
				r.Add(key(si), lib, "scpu", rt.ServerPerPair())
				harness.Logf("d run %d %s %-12s %8.0f pairs/s, server CPU per pair %.0f µs", run+1, key(si), lib, rt.PerS(), rt.ServerPerPair())
			}
		}
	}
	w("#### Diagnostic (d): what the commits cost in (a)\n\n")
	w("Not a headline: (a) — 1 goroutine, Lock + Unlock of one name — for pg_advisory_lock, for pg_advisory_lock with a committed write at the acquisition and another at the release (an upsert of one row in autocommit each: 2 commits and 4 round trips per pair, as distlock-pg's two transactions of two round trips), and for distlock-pg, on three PostgreSQL servers started alike but for the setting named. Medians over %d runs; ratios are medians of per-run ratios to pg_advisory_lock on the same server.\n\n", c.runs)
	var titles []string
	for _, l := range libs {
		titles = append(titles, sqlbench.Title(l)+": pairs/s, ÷ advisory; server CPU per pair")
	}
	harness.TableHeader(w, "server", titles)
	for si, s := range settings {
		w("| %s |", s.name)
		for _, l := range libs {
			v := harness.Num(r.Med(key(si), l, "ops")) + r.Spread(key(si), l, "ops", harness.Num)
			if l != sqlbench.Advisory {
				v += ", **" + harness.RatioStr(r.Ratio(key(si), l, sqlbench.Advisory, "ops")) + "**"
			}
			v += "; " + harness.Num(r.Med(key(si), l, "scpu")) + " µs"
			w(" %s |", v)
		}
		w("\n")
	}
	w("\n")
	return versions
}

func machine(c config, load0, load1 string, took time.Duration, serverCPUs []int, versions []string) string {
	rev := harness.Commit("SQLBENCH_COMMIT")
	pin := "Not pinned (-pin=false)."
	if serverCPUs != nil {
		pin = fmt.Sprintf("Pinned: the database servers (every process and thread) on CPU %v, sqlbench on the others.", serverCPUs)
	}
	srv := "PostgreSQL and MariaDB"
	if len(versions) > 0 {
		srv = strings.Join(versions, " and ")
	}
	return fmt.Sprintf("distlock at commit %s; %s, started by package sqltest on 127.0.0.1 (PostgreSQL with fsync=off, synchronous_commit=on, full_page_writes=off — a commit writes its WAL to the kernel but does not wait for the disk; MariaDB with innodb_flush_log_at_trx_commit=2 and no doublewrite buffer). Drivers: pgx v5 (pgxpool; pglock through pgx's database/sql driver), go-sql-driver/mysql v1.10.1. %d CPU cores (%s), %s %s/%s. %s Load average %s at the start, %s at the end; took %v.\n",
		rev, srv, runtime.NumCPU(), harness.CPUModel(), runtime.Version(), runtime.GOOS, runtime.GOARCH, pin, load0, load1, took.Round(time.Second))
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "sqlbench:", err)
	stopAll()
	os.Exit(1)
}
