package sqlstore_test

// Fault tests of the SQL store, on real PostgreSQL and MariaDB servers
// (package sqltest): the database restarted, paused, killed under load,
// cut off by a proxy, starved of connections, timing statements out, and
// given bad settings. Each test asserts what the lock must guarantee
// through the fault: never two live holders at once (a lease context is
// cancelled before anyone else can take the lock), typed errors, no
// caller stuck past its context, and nothing left held afterwards.
//
// Ordering is checked by what a goroutine can see, not by clocks: when a
// second owner's Lock returns, the first owner's lease context must
// already be done (context cancellation is monotonic, so if it is not
// done then, it was not done when the second owner got the lock either).

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sqlstore"
	"github.com/distlock/distlock/sqltest"
	"github.com/distlock/distlock/store"
	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// faultKinds are the databases every fault test runs on.
var faultKinds = []string{"postgres", "mariadb"}

// faultServer is what the tests do to a server of package sqltest.
type faultServer interface {
	Addr() string
	DSN() string
	Kill() error
	Pause() error
	Resume() error
	Shutdown() error
	Restart() error
}

// faultDB is one database server of a fault test.
type faultDB struct {
	kind string // "postgres" or "mariadb"
	srv  faultServer
}

func startFaultDB(t *testing.T, kind string) *faultDB {
	t.Helper()
	if kind == "postgres" {
		return &faultDB{kind: kind, srv: sqltest.StartPostgres(t)}
	}
	return &faultDB{kind: kind, srv: sqltest.StartMariaDB(t)}
}

// dsn returns the server's DSN with addr (the server's own address, a
// proxy's or a closed port) in place of its address, the user user if not
// empty, and params ("key=value": PostgreSQL run-time parameters or pgxpool
// settings; MariaDB system variables).
func (d *faultDB) dsn(t testing.TB, addr, user string, params ...string) string {
	t.Helper()
	return faultDSNFor(t, d.kind, d.srv.DSN(), addr, user, params...)
}

func faultDSNFor(t testing.TB, kind, base, addr, user string, params ...string) string {
	t.Helper()
	if kind == "postgres" {
		u, err := url.Parse(base)
		if err != nil {
			t.Fatal(err)
		}
		u.Host = addr
		if user != "" {
			u.User = url.User(user)
		}
		q := u.Query()
		for _, p := range params {
			k, v, _ := strings.Cut(p, "=")
			q.Set(k, v)
		}
		u.RawQuery = q.Encode()
		return u.String()
	}
	cfg, err := mysqldrv.ParseDSN(base)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Addr = addr
	if user != "" {
		cfg.User = user
	}
	for _, p := range params {
		k, v, _ := strings.Cut(p, "=")
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		cfg.Params[k] = v
	}
	return cfg.FormatDSN()
}

// direct is the DSN of the server itself.
func (d *faultDB) direct(t testing.TB) string { return d.dsn(t, d.srv.Addr(), "") }

// tagged is the DSN of addr whose PostgreSQL sessions carry the
// application_name tag (so that pg_stat_activity tells them apart); on
// MariaDB, the DSN of addr.
func (d *faultDB) tagged(t testing.TB, addr, tag string) string {
	if d.kind == "postgres" {
		return d.dsn(t, addr, "", "application_name="+tag)
	}
	return d.dsn(t, addr, "")
}

// store returns a store on dsn; its pool or database is closed when the
// test ends (after the Client, which closes the store).
func (d *faultDB) store(t testing.TB, dsn string, opts ...sqlstore.Option) *sqlstore.Store {
	t.Helper()
	return faultStoreFor(t, d.kind, dsn, opts...)
}

func faultStoreFor(t testing.TB, kind, dsn string, opts ...sqlstore.Option) *sqlstore.Store {
	t.Helper()
	if kind == "postgres" {
		return sqlstore.NewPostgres(pool(t, dsn), opts...)
	}
	return sqlstore.NewMySQL(mysqlDB(t, dsn), opts...)
}

// faultClient returns a Client on st, without logging, closed when the
// test ends.
func faultClient(t testing.TB, st *sqlstore.Store, opts ...distlock.Option) *distlock.Client {
	c := distlock.New(st, append([]distlock.Option{distlock.WithLogger(nil)}, opts...)...)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// events records a Client's events.
type faultEvents struct {
	mu   sync.Mutex
	list []distlock.Event
}

func (e *faultEvents) add(ev distlock.Event) {
	e.mu.Lock()
	e.list = append(e.list, ev)
	e.mu.Unlock()
}

func (e *faultEvents) count(kind distlock.EventKind, name string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.list {
		if ev.Kind == kind && ev.Name == name {
			n++
		}
	}
	return n
}

// eventually polls cond until it holds, failing the test after within.
func faultEventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// lockRetry is Lock, tried again while it fails with ErrBackend (a pooled
// connection that died with the server, the server still starting) and
// ctx lasts.
func faultLockRetry(ctx context.Context, m *distlock.Mutex) (*distlock.Lease, error) {
	for {
		l, err := m.Lock(ctx)
		if err == nil || !errors.Is(err, distlock.ErrBackend) || ctx.Err() != nil {
			return l, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(50 * time.Millisecond): // a retry's pause
		}
	}
}

// mustLock takes m within d (retrying backend failures), or fails the test.
func faultMustLock(t testing.TB, m *distlock.Mutex, d time.Duration) *distlock.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	l, err := faultLockRetry(ctx, m)
	if err != nil {
		t.Fatalf("lock %q: %v", m.Name(), err)
	}
	return l
}

// inspectRetry is Inspect, tried again while it fails with ErrBackend.
func faultInspect(t testing.TB, m *distlock.Mutex) distlock.LockInfo {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		info, err := m.Inspect(ctx)
		cancel()
		if err == nil {
			return info
		}
		if !errors.Is(err, distlock.ErrBackend) || time.Now().After(deadline) {
			t.Fatalf("inspect %q: %v", m.Name(), err)
		}
		time.Sleep(50 * time.Millisecond) // a retry's pause
	}
}

// unlock unlocks l and checks that the release is confirmed.
func faultUnlock(t testing.TB, l *distlock.Lease) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.Unlock(ctx); err != nil {
		t.Errorf("unlock %q: %v", l.Name(), err)
	}
}

// faultLockResult is what a Lock in a goroutine returned, and whether the
// lease context of the owner it contends with was done when it returned.
type faultLockResult struct {
	l          *distlock.Lease
	err        error
	firstEnded bool
}

// settle finds out, after a fault, whether l still holds its lock: it
// extends the lease (the same request as a renewal, on the store's Renew)
// until that is confirmed, or the lock is reported lost. A lost lease must
// have its context done.
func faultSettle(t testing.TB, l *distlock.Lease) (kept bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err := l.Extend(ctx, distlock.DefaultTTL)
		cancel()
		switch {
		case err == nil:
			if l.Context().Err() != nil {
				t.Errorf("extension confirmed but the lease context is done: %v", context.Cause(l.Context()))
			}
			return true
		case errors.Is(err, distlock.ErrLockLost):
			if l.Context().Err() == nil {
				t.Errorf("the lock is lost (%v) but its lease context is live", err)
			}
			return false
		case !errors.Is(err, distlock.ErrBackend) && !errors.Is(err, context.DeadlineExceeded):
			t.Fatalf("extend after the fault: untyped error %v", err)
		case time.Now().After(deadline):
			t.Fatalf("extend after the fault: still failing: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // a retry's pause
	}
}

// TestFaultRestart restarts the database (a clean shutdown, then a crash)
// while a lock is held with the default options. The holder either keeps
// the lock (an extension is confirmed after the restart, within the
// lease) or loses it with its lease context cancelled; either way another
// client that waits for the lock gets it only once the first's lease
// context is done, and tokens keep growing: the row's counter survived.
func TestFaultRestart(t *testing.T) {
	for _, kind := range faultKinds {
		t.Run(kind, func(t *testing.T) {
			d := startFaultDB(t, kind)
			holder := faultClient(t, d.store(t, d.direct(t)))
			ev := &faultEvents{}
			other := faultClient(t, d.store(t, d.direct(t)), distlock.WithEventHandler(ev.add))
			const name = "restart"
			var last uint64
			for _, fault := range []struct {
				name string
				down func() error
			}{{"shutdown", d.srv.Shutdown}, {"kill", d.srv.Kill}} {
				l1 := faultMustLock(t, holder.Mutex(name), 20*time.Second)
				tok1 := l1.Token()
				if tok1 <= last {
					t.Errorf("%s: token %d not above the last one, %d", fault.name, tok1, last)
				}
				if err := fault.down(); err != nil {
					t.Fatal(err)
				}
				if err := d.srv.Restart(); err != nil {
					t.Fatal(err)
				}

				info := faultInspect(t, other.Mutex(name))
				if info.LastToken < tok1 {
					t.Errorf("%s: after the restart the last token is %d, below %d issued before: the counter is not durable", fault.name, info.LastToken, tok1)
				}
				kept := faultSettle(t, l1)
				if kept && (!info.Locked || info.Token != tok1) {
					t.Errorf("%s: the holder kept the lock, but the row read after the restart says locked=%v token=%d, want token %d", fault.name, info.Locked, info.Token, tok1)
				}
				t.Logf("%s: holder kept the lock: %v", fault.name, kept)

				waits := ev.count(distlock.EventWaiting, name)
				res := make(chan faultLockResult, 1)
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
					defer cancel()
					l, err := faultLockRetry(ctx, other.Mutex(name))
					res <- faultLockResult{l, err, l1.Context().Err() != nil}
				}()
				if kept {
					// The other client must wait while the holder holds.
					deadline := time.After(20 * time.Second)
					for ev.count(distlock.EventWaiting, name) == waits {
						select {
						case r := <-res:
							t.Fatalf("%s: the other client's Lock returned (lease %v, err %v) while the holder held the lock", fault.name, r.l, r.err)
						case <-deadline:
							t.Fatalf("%s: the other client does not wait", fault.name)
						case <-time.After(10 * time.Millisecond):
						}
					}
					if err := l1.Unlock(context.Background()); err != nil && !errors.Is(err, distlock.ErrLockLost) {
						t.Errorf("%s: unlock: %v", fault.name, err)
					}
				}
				var r faultLockResult
				select {
				case r = <-res:
				case <-time.After(60 * time.Second):
					t.Fatalf("%s: the other client's Lock did not return", fault.name)
				}
				if r.err != nil {
					t.Fatalf("%s: the other client could not take the lock: %v", fault.name, r.err)
				}
				if !r.firstEnded {
					t.Errorf("%s: two holders: the other client took the lock while the first lease's context was live", fault.name)
				}
				if r.l.Token() <= tok1 {
					t.Errorf("%s: token after the restart %d, not above %d before", fault.name, r.l.Token(), tok1)
				}
				if !kept {
					err := l1.Unlock(context.Background())
					if !errors.Is(err, distlock.ErrLockLost) {
						t.Errorf("%s: unlock of the lost lease: %v, want ErrLockLost", fault.name, err)
					}
					if cause := context.Cause(l1.Context()); !errors.Is(cause, distlock.ErrLockLost) {
						t.Errorf("%s: lost lease's context cause %v, want ErrLockLost", fault.name, cause)
					}
				}
				last = r.l.Token()
				faultUnlock(t, r.l)
			}
		})
	}
}

// TestFaultPause freezes the database (SIGSTOP) for two leases of 2 s
// while a lock is held. The holder's lease context must be cancelled
// while the database is still frozen (the engine's deadline counts from
// the renewal's send); after the database resumes, the renewal it had
// queued must not give the lock back to the old holder: another client
// takes it, the row has that client as its only holder, and the old lease
// reports the loss.
func TestFaultPause(t *testing.T) {
	for _, kind := range faultKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			d := startFaultDB(t, kind)
			const lease = 2 * time.Second
			const name = "pause"
			a := faultClient(t, d.store(t, d.direct(t)))
			stB := d.store(t, d.direct(t))
			b := faultClient(t, stB)
			l1 := faultMustLock(t, a.Mutex(name, distlock.WithTTL(lease)), 10*time.Second)
			tok1 := l1.Token()

			paused := time.Now()
			if err := d.srv.Pause(); err != nil {
				t.Fatal(err)
			}
			resumed := false
			t.Cleanup(func() {
				if !resumed {
					_ = d.srv.Resume()
				}
			})
			select {
			case <-l1.Context().Done():
			case <-time.After(5 * lease):
				t.Fatal("the lease context is not cancelled while the database is paused")
			}
			if cause := context.Cause(l1.Context()); !errors.Is(cause, distlock.ErrLockLost) {
				t.Errorf("lease context cause %v, want ErrLockLost", cause)
			}
			// The fault lasts two leases: on the database's clock too,
			// the lease has run out when the queued renewal is read.
			time.Sleep(time.Until(paused.Add(2 * lease)))
			if err := d.srv.Resume(); err != nil {
				t.Fatal(err)
			}
			resumed = true

			l2 := faultMustLock(t, b.Mutex(name, distlock.WithTTL(lease)), 20*time.Second)
			if l2.Token() <= tok1 {
				t.Errorf("token %d after the pause, not above %d", l2.Token(), tok1)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := l1.Unlock(ctx); !errors.Is(err, distlock.ErrLockLost) {
				t.Errorf("unlock of the old lease: %v, want ErrLockLost", err)
			}
			// The late renewal did not revive the old holder: the new
			// one is the only holder, and its lease is renewed.
			if err := l2.Extend(ctx, lease); err != nil {
				t.Errorf("extend the new lease: %v", err)
			}
			st, err := stB.Inspect(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Holders) != 1 || st.Holders[0].Token != l2.Token() {
				t.Errorf("after the pause the row's holders are %+v, want only token %d", st.Holders, l2.Token())
			}
			if l2.Context().Err() != nil {
				t.Errorf("the new lease is over: %v", context.Cause(l2.Context()))
			}
			faultUnlock(t, l2)
		})
	}
}

// faultOccupant is who is in a critical section of TestFaultLoad.
type faultOccupant struct {
	lease *distlock.Lease
}

// faultGuarded is one name's shared state in TestFaultLoad.
type faultGuarded struct {
	in      atomic.Pointer[faultOccupant] // who is in the critical section
	counter atomic.Int64                  // incremented non-atomically: a Load, then a Store
	entries atomic.Int64                  // critical sections entered
	lastTok atomic.Uint64                 // the last token seen in the critical section
}

// TestFaultLoad runs 4 clients of 4 goroutines each, locking 2 names
// (leases of 5 s) and incrementing a counter per name non-atomically under
// the lock, and kills and restarts the database in the middle. No
// critical section ever overlaps one whose lease is live, tokens grow in
// the order of the critical sections, no increment is lost, locking
// resumes after the restart, every goroutine ends, and nothing is left
// held: free at once, or, if its last release was confirmed just before
// the kill and lost with it (PostgreSQL: a release commits with
// synchronous_commit off), when that holder's lease ends.
func TestFaultLoad(t *testing.T) {
	for _, kind := range faultKinds {
		t.Run(kind, func(t *testing.T) {
			d := startFaultDB(t, kind)
			const clients, workers = 4, 4
			const lease = 5 * time.Second
			names := []string{"load-a", "load-b"}
			guards := []*faultGuarded{{}, {}}
			var total, after, backendErrs, overlaps, tolerated, fencing atomic.Int64
			var restarted atomic.Bool
			unexpected := make(chan error, 100)
			report := func(err error) {
				select {
				case unexpected <- err:
				default:
				}
			}
			ctx, stop := context.WithCancel(context.Background())
			defer stop()
			// What happened to each token, for the report of a lock left held.
			var histMu sync.Mutex
			history := map[uint64][]string{}
			note := func(tok uint64, format string, args ...any) {
				histMu.Lock()
				history[tok] = append(history[tok], fmt.Sprintf("%s (restarted %v) ", time.Now().Format("15:04:05.000"), restarted.Load())+fmt.Sprintf(format, args...))
				histMu.Unlock()
			}
			var wg sync.WaitGroup
			cs := make([]*distlock.Client, clients)
			for i := range clients {
				cs[i] = faultClient(t, d.store(t, d.direct(t)))
				for j := range workers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						k := (i + j) % len(names)
						m, g := cs[i].Mutex(names[k], distlock.WithTTL(lease)), guards[k]
						for ctx.Err() == nil {
							lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
							l, err := m.Lock(lctx)
							cancel()
							if err != nil {
								if ctx.Err() != nil {
									return
								}
								if !errors.Is(err, distlock.ErrBackend) && !errors.Is(err, distlock.ErrNotAcquired) {
									report(fmt.Errorf("lock: untyped error %w", err))
								}
								backendErrs.Add(1)
								time.Sleep(20 * time.Millisecond) // a retry's pause while the server is down
								continue
							}
							note(l.Token(), "acquired by client %d worker %d", i, j)
							me := &faultOccupant{lease: l}
							if prev := g.in.Swap(me); prev != nil {
								if prev.lease.Context().Err() == nil {
									overlaps.Add(1)
									report(fmt.Errorf("overlap on %q: token %d entered while token %d's lease is live", names[k], l.Token(), prev.lease.Token()))
								} else {
									tolerated.Add(1) // the previous holder lost its lock and was still working
								}
							}
							if tok := l.Token(); tok <= g.lastTok.Load() {
								fencing.Add(1)
								report(fmt.Errorf("token %d on %q after %d", tok, names[k], g.lastTok.Load()))
							} else {
								g.lastTok.Store(tok)
							}
							v := g.counter.Load()
							runtime.Gosched()
							g.counter.Store(v + 1)
							g.entries.Add(1)
							total.Add(1)
							if restarted.Load() {
								after.Add(1)
							}
							g.in.CompareAndSwap(me, nil)
							uctx, ucancel := context.WithTimeout(context.Background(), 5*time.Second)
							err = l.Unlock(uctx)
							ucancel()
							note(l.Token(), "unlocked: %v", err)
							if err != nil && !errors.Is(err, distlock.ErrBackend) && !errors.Is(err, distlock.ErrLockLost) &&
								!errors.Is(err, context.DeadlineExceeded) {
								report(fmt.Errorf("unlock: untyped error %w", err))
							}
						}
					}()
				}
			}

			faultEventually(t, 30*time.Second, "40 critical sections before the kill", func() bool { return total.Load() >= 40 })
			t.Logf("kill at %s", time.Now().Format("15:04:05.000"))
			if err := d.srv.Kill(); err != nil {
				t.Fatal(err)
			}
			if err := d.srv.Restart(); err != nil {
				t.Fatal(err)
			}
			restarted.Store(true)
			t.Logf("restarted at %s", time.Now().Format("15:04:05.000"))
			before := total.Load()
			faultEventually(t, 45*time.Second, "40 critical sections after the restart", func() bool { return after.Load() >= 40 })
			t.Logf("stop at %s", time.Now().Format("15:04:05.000"))
			stop()
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				var buf bytes.Buffer
				_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
				t.Fatalf("workers stuck 30 s after the end of the run:\n%s", buf.String())
			}
			close(unexpected)
			for err := range unexpected {
				t.Error(err)
			}
			t.Logf("%d critical sections before the kill, %d after the restart; %d failed Locks; %d overlaps with a lost lease",
				before, after.Load(), backendErrs.Load(), tolerated.Load())
			if overlaps.Load() > 0 || fencing.Load() > 0 {
				t.Errorf("%d overlapping critical sections, %d tokens out of order", overlaps.Load(), fencing.Load())
			}
			for k, g := range guards {
				if tolerated.Load() == 0 && g.counter.Load() != g.entries.Load() {
					t.Errorf("%q: counter %d after %d critical sections: increments lost", names[k], g.counter.Load(), g.entries.Load())
				}
			}
			for i, c := range cs {
				if err := c.Close(); err != nil {
					t.Errorf("close client %d: %v", i, err)
				}
			}
			// Nothing is left held: a fresh client takes both at once,
			// unless the lock's last release was confirmed just before the
			// kill and lost with it (on PostgreSQL a release that grants
			// nothing commits with synchronous_commit off, by design): then
			// the lock is held until its lease ends, and no longer.
			fresh := faultClient(t, d.store(t, d.direct(t)))
			for _, name := range names {
				info := faultInspect(t, fresh.Mutex(name))
				wait := time.Duration(0)
				if info.Locked {
					histMu.Lock()
					h := history[info.Token]
					histMu.Unlock()
					released := len(h) > 0 && strings.HasSuffix(h[len(h)-1], "(restarted false) unlocked: <nil>")
					if !released {
						t.Errorf("%q still held after the run: %+v; the token's history: %q", name, info, h)
					} else {
						t.Logf("%q still held after the run by token %d, whose release was confirmed before the restart and lost in the crash: %q", name, info.Token, h)
					}
					wait = lease + 5*time.Second
				}
				var l *distlock.Lease
				faultEventually(t, wait, fmt.Sprintf("try-lock %q after the run", name), func() bool {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					var err error
					l, err = fresh.Mutex(name).TryLock(ctx)
					if err != nil && wait == 0 {
						t.Errorf("try-lock %q after the run: %v", name, err)
						return true
					}
					return err == nil
				})
				if l != nil {
					faultUnlock(t, l)
				}
			}
		})
	}
}

// startProxy starts an in-process toxiproxy in front of upstream; it is
// stopped when the test ends (after the Clients and pools made later).
func startFaultProxy(t *testing.T, upstream string) *toxiproxy.Proxy {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "db", "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

// listenPID returns the pid of the backend listening for the session
// tagged app (0 if none), other than not.
func faultListenPID(t testing.TB, admin *pgx.Conn, app string, not int) int {
	t.Helper()
	var pids []int
	q, err := admin.Query(context.Background(), `SELECT pid FROM pg_stat_activity
		WHERE application_name = $1 AND query LIKE 'LISTEN %' AND state = 'idle' AND pid <> $2`, app, not)
	if err == nil {
		pids, err = pgx.CollectRows(q, pgx.RowTo[int])
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(pids) == 0 {
		return 0
	}
	return pids[0]
}

// awaitWaiting waits until ev has more EventWaiting of name than before.
func faultAwaitWaiting(t testing.TB, ev *faultEvents, name string, before int, early <-chan faultLockResult) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for ev.count(distlock.EventWaiting, name) == before {
		select {
		case r := <-early:
			t.Fatalf("Lock of %q returned (lease %v, err %v) instead of waiting", name, r.l, r.err)
		case <-deadline:
			t.Fatalf("nobody waits for %q", name)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestFaultProxy cuts the connections between the store and the database
// with a proxy (toxiproxy, in process): all of them, while a holder
// renews through the proxy and a waiter waits through it; on PostgreSQL,
// also only the waiter's LISTEN connection. The holder's lease context
// ends before a client with a direct connection takes the lock; the
// waiter returns by its context's end with the lock or a typed error;
// after the proxy is back, a waiter is woken by a release again.
func TestFaultProxy(t *testing.T) {
	for _, kind := range faultKinds {
		t.Run(kind, func(t *testing.T) {
			d := startFaultDB(t, kind)
			px := startFaultProxy(t, d.srv.Addr())
			proxyAddr := px.Listen
			cut := func() { px.Stop() }
			restore := func() {
				if err := px.Start(); err != nil {
					t.Fatal(err)
				}
			}
			const lease = 2 * time.Second
			hEv, wEv, dEv := &faultEvents{}, &faultEvents{}, &faultEvents{}
			H := faultClient(t, d.store(t, d.tagged(t, proxyAddr, "distlock_h")), distlock.WithEventHandler(hEv.add))
			W := faultClient(t, d.store(t, d.tagged(t, proxyAddr, "distlock_w")), distlock.WithEventHandler(wEv.add))
			D := faultClient(t, d.store(t, d.direct(t)), distlock.WithEventHandler(dEv.add))

			t.Run("holder-and-waiter", func(t *testing.T) {
				const name = "cut"
				lh := faultMustLock(t, H.Mutex(name, distlock.WithTTL(lease)), 10*time.Second)
				wctx, wcancel := context.WithTimeout(context.Background(), 2*lease)
				defer wcancel()
				wDeadline, _ := wctx.Deadline()
				wres := make(chan faultLockResult, 1)
				waits := wEv.count(distlock.EventWaiting, name)
				go func() {
					l, err := W.Mutex(name, distlock.WithTTL(lease)).Lock(wctx)
					wres <- faultLockResult{l, err, lh.Context().Err() != nil}
				}()
				faultAwaitWaiting(t, wEv, name, waits, wres)
				dres := make(chan faultLockResult, 1)
				waits = dEv.count(distlock.EventWaiting, name)
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					l, err := D.Mutex(name, distlock.WithTTL(lease)).Lock(ctx)
					dres <- faultLockResult{l, err, lh.Context().Err() != nil}
				}()
				faultAwaitWaiting(t, dEv, name, waits, dres)

				cut()
				var r faultLockResult
				select {
				case r = <-dres:
				case <-time.After(40 * time.Second):
					t.Fatal("the direct client's Lock did not return")
				}
				if r.err != nil {
					t.Fatalf("the direct client could not take the lock: %v", r.err)
				}
				if !r.firstEnded {
					t.Errorf("two holders: the direct client took the lock while the cut-off holder's lease context was live")
				}
				if cause := context.Cause(lh.Context()); !errors.Is(cause, distlock.ErrLockLost) {
					t.Errorf("cut-off holder's context cause %v, want ErrLockLost", cause)
				}

				// The waiter returns by the end of its context (plus the
				// clean-up an ended Lock waits for, 5 s at most).
				select {
				case w := <-wres:
					switch {
					case w.err == nil:
						t.Errorf("the cut-off waiter got the lock (token %d) while the direct client holds it (token %d)", w.l.Token(), r.l.Token())
						faultUnlock(t, w.l)
					case errors.Is(w.err, distlock.ErrBackend):
						t.Logf("waiter: %v", w.err)
					case errors.Is(w.err, distlock.ErrNotAcquired) && errors.Is(w.err, context.DeadlineExceeded):
						t.Logf("waiter: %v", w.err)
					default:
						t.Errorf("the cut-off waiter's error is not typed: %v", w.err)
					}
				case <-time.After(time.Until(wDeadline) + 8*time.Second):
					t.Fatal("the cut-off waiter's Lock hangs past its context")
				}

				restore()
				if err := lh.Unlock(context.Background()); !errors.Is(err, distlock.ErrLockLost) {
					t.Errorf("unlock of the cut-off lease: %v, want ErrLockLost", err)
				}
				faultUnlock(t, r.l)
				// Through the proxy again, the lock can be had.
				faultUnlock(t, faultMustLock(t, W.Mutex(name, distlock.WithTTL(lease)), 20*time.Second))
			})

			// A waiter through the proxy, for a lock that the direct
			// client holds with the default lease (30 s): woken only by
			// the release's notice (PostgreSQL) or the poller (MariaDB),
			// not by its fallback timer, before its context of 15 s ends.
			wokenAfter := func(t *testing.T, name string, fault func()) {
				t.Helper()
				ld := faultMustLock(t, D.Mutex(name), 10*time.Second)
				waits := wEv.count(distlock.EventWaiting, name)
				wres := make(chan faultLockResult, 1)
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
					defer cancel()
					l, err := faultLockRetry(ctx, W.Mutex(name))
					wres <- faultLockResult{l, err, ld.Context().Err() != nil}
				}()
				faultAwaitWaiting(t, wEv, name, waits, wres)
				fault()
				faultUnlock(t, ld)
				select {
				case r := <-wres:
					if r.err != nil {
						t.Fatalf("the waiter was not woken by the release: %v", r.err)
					}
					if !r.firstEnded {
						t.Errorf("two holders")
					}
					faultUnlock(t, r.l)
				case <-time.After(30 * time.Second):
					t.Fatal("the waiter's Lock hangs past its context")
				}
			}

			if kind == "postgres" {
				admin, err := pgx.Connect(context.Background(), d.direct(t))
				if err != nil {
					t.Fatal(err)
				}
				defer admin.Close(context.Background())
				t.Run("listen-only", func(t *testing.T) {
					wokenAfter(t, "listen-only", func() {
						var old int
						faultEventually(t, 10*time.Second, "the waiter's LISTEN connection", func() bool {
							old = faultListenPID(t, admin, "distlock_w", 0)
							return old != 0
						})
						if _, err := admin.Exec(context.Background(), `SELECT pg_terminate_backend($1)`, old); err != nil {
							t.Fatal(err)
						}
						faultEventually(t, 10*time.Second, "the store listens again", func() bool {
							return faultListenPID(t, admin, "distlock_w", old) != 0
						})
					})
				})
				t.Run("proxy-cut", func(t *testing.T) {
					wokenAfter(t, "proxy-cut", func() {
						old := faultListenPID(t, admin, "distlock_w", 0)
						cut()
						restore()
						faultEventually(t, 10*time.Second, "the store listens again through the proxy", func() bool {
							return faultListenPID(t, admin, "distlock_w", old) != 0
						})
					})
				})
				return
			}
			t.Run("proxy-cut", func(t *testing.T) {
				wokenAfter(t, "proxy-cut", func() {
					cut()
					time.Sleep(500 * time.Millisecond) // the fault's length: several poll intervals fail
					restore()
				})
			})
		})
	}
}

// exerciseOneConn runs 6 goroutines of one Client on 3 names (two per
// name, so that one waits for the other), 5 rounds each: every one must
// complete, on a pool of one connection.
func faultOneConn(t *testing.T, c *distlock.Client) {
	t.Helper()
	errs := make(chan error, 6)
	for i := range 6 {
		go func() {
			m := c.Mutex(fmt.Sprintf("pool-%d", i%3))
			for range 5 {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				l, err := m.Lock(ctx)
				if err == nil {
					runtime.Gosched()
					err = l.Unlock(ctx)
				}
				cancel()
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 6 {
		select {
		case err := <-errs:
			if err != nil {
				t.Errorf("lock on a pool of one connection: %v", err)
			}
		case <-time.After(60 * time.Second):
			var buf bytes.Buffer
			_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
			t.Fatalf("goroutines stuck on a pool of one connection:\n%s", buf.String())
		}
	}
}

// lockWhileStarved locks while the pool's only connection is taken (by
// the test), with a context of 1 s; release gives the connection back when
// that context has ended. Lock must return the context's error, wrapped,
// and the lock must be free afterwards.
func faultStarved(t *testing.T, c *distlock.Client, release func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	go func() {
		<-ctx.Done()
		release()
	}()
	res := make(chan faultLockResult, 1)
	go func() {
		l, err := c.Mutex("starved").Lock(ctx)
		res <- faultLockResult{l: l, err: err}
	}()
	select {
	case r := <-res:
		if r.err == nil {
			t.Errorf("Lock succeeded without a connection")
			faultUnlock(t, r.l)
		} else if !errors.Is(r.err, context.DeadlineExceeded) || !errors.Is(r.err, distlock.ErrNotAcquired) {
			t.Errorf("Lock starved of connections: %v, want ErrNotAcquired and the context's error", r.err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Lock starved of connections hangs past its context")
	}
	// The request that waited for the connection ran late, and was
	// cleaned up: the lock is free.
	faultEventually(t, 10*time.Second, "the starved lock is free", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		l, err := c.Mutex("starved").TryLock(ctx)
		if err != nil {
			return false
		}
		faultUnlock(t, l)
		return true
	})
}

// TestFaultPool runs a Client on a pool of one connection (pgxpool
// MaxConns 1; database/sql SetMaxOpenConns(1)): goroutines locking,
// waiting and unlocking all complete (a step holds one connection at a
// time, and PostgreSQL's LISTEN connection is not the pool's), and a Lock
// whose context ends while it waits for the connection returns the
// context's error.
func TestFaultPool(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		d := startFaultDB(t, "postgres")
		p := pool(t, d.dsn(t, d.srv.Addr(), "", "pool_max_conns=1"))
		if got := p.Config().MaxConns; got != 1 {
			t.Fatalf("MaxConns %d", got)
		}
		c := faultClient(t, sqlstore.NewPostgres(p))
		faultOneConn(t, c)
		conn, err := p.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		faultStarved(t, c, conn.Release)
	})
	t.Run("mariadb", func(t *testing.T) {
		d := startFaultDB(t, "mariadb")
		db := mysqlDB(t, d.direct(t))
		db.SetMaxOpenConns(1)
		c := faultClient(t, sqlstore.NewMySQL(db))
		faultOneConn(t, c)
		conn, err := db.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		faultStarved(t, c, func() { _ = conn.Close() })
	})
}

// TestFaultTimeout runs the store's steps on a row that another
// transaction holds FOR UPDATE, on connections with a lock or statement
// timeout (PostgreSQL lock_timeout and statement_timeout; MariaDB
// innodb_lock_wait_timeout=0, which the store retries, and
// max_statement_time): Lock, TryLock and Unlock fail with ErrBackend,
// and once the row is free the lock is freed too (the release is retried
// in the background), well before its 30 s lease ends.
func TestFaultTimeout(t *testing.T) {
	for _, kind := range faultKinds {
		t.Run(kind, func(t *testing.T) {
			d := startFaultDB(t, kind)
			holderDSN := d.dsn(t, d.srv.Addr(), "", "lock_timeout=1ms")
			contenderDSN := d.dsn(t, d.srv.Addr(), "", "statement_timeout=1ms")
			rowLock := `SELECT 1 FROM distlock_locks WHERE name = $1 FOR UPDATE`
			if kind == "mariadb" {
				holderDSN = d.dsn(t, d.srv.Addr(), "", "innodb_lock_wait_timeout=0")
				contenderDSN = d.dsn(t, d.srv.Addr(), "", "max_statement_time=0.001")
				rowLock = `SELECT 1 FROM distlock_locks WHERE name = ? FOR UPDATE`
			}
			const name = "slow"
			normal := faultClient(t, d.store(t, d.direct(t)))
			faultUnlock(t, faultMustLock(t, normal.Mutex(name), 10*time.Second)) // the tables and the row
			holder := faultClient(t, d.store(t, holderDSN))
			contender := faultClient(t, d.store(t, contenderDSN))
			lh := faultMustLock(t, holder.Mutex(name), 10*time.Second)

			// Another transaction holds the row.
			var commit func()
			if kind == "postgres" {
				conn, err := pgx.Connect(context.Background(), d.direct(t))
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close(context.Background())
				tx, err := conn.Begin(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if _, err := tx.Exec(context.Background(), rowLock, name); err != nil {
					t.Fatal(err)
				}
				commit = func() {
					if err := tx.Commit(context.Background()); err != nil {
						t.Fatal(err)
					}
				}
			} else {
				db := mysqlDB(t, d.direct(t))
				tx, err := db.BeginTx(context.Background(), nil)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := tx.Exec(rowLock, name); err != nil {
					t.Fatal(err)
				}
				commit = func() {
					if err := tx.Commit(); err != nil {
						t.Fatal(err)
					}
				}
			}

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if l, err := contender.Mutex(name).TryLock(ctx); !errors.Is(err, distlock.ErrBackend) {
				t.Errorf("try-lock on a row held by another transaction, with a statement timeout: %v, want ErrBackend", err)
				if l != nil {
					faultUnlock(t, l)
				}
			} else {
				t.Logf("try-lock: %v", err)
			}
			if l, err := contender.Mutex(name).Lock(ctx); !errors.Is(err, distlock.ErrBackend) {
				t.Errorf("lock on a row held by another transaction, with a statement timeout: %v, want ErrBackend", err)
				if l != nil {
					faultUnlock(t, l)
				}
			}
			if l, err := holder.Mutex(name).TryLock(ctx); !errors.Is(err, distlock.ErrBackend) {
				t.Errorf("try-lock on a row held by another transaction, with a lock timeout: %v, want ErrBackend", err)
				if l != nil {
					faultUnlock(t, l)
				}
			}
			err := lh.Unlock(ctx)
			if !errors.Is(err, distlock.ErrBackend) {
				t.Errorf("unlock on a row held by another transaction, with a lock timeout: %v, want ErrBackend", err)
			} else {
				t.Logf("unlock: %v", err)
			}
			if lh.Context().Err() == nil {
				t.Error("the lease context is live after Unlock")
			}
			commit()

			// The holder's release, retried in the background, frees the
			// lock long before its lease (30 s) would.
			faultEventually(t, 10*time.Second, "the lock freed after the row is", func() bool {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				l, err := normal.Mutex(name).TryLock(ctx)
				if err != nil {
					return false
				}
				faultUnlock(t, l)
				return true
			})
		})
	}
}

// closedPort returns a port of 127.0.0.1 that nothing listens on.
func faultClosedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

// noPanic runs f, failing the test if it panics.
func faultNoPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s panicked: %v", what, r)
		}
	}()
	f()
}

// TestFaultBadInput gives the store what it cannot work with: a closed
// port, a user who may not create tables, missing tables with
// WithoutMigration, a nil pool or database and an invalid table name.
func TestFaultBadInput(t *testing.T) {
	baseDSN := map[string]string{
		"postgres": "postgres://postgres@127.0.0.1:1/test?sslmode=disable",
		"mariadb":  "root@tcp(127.0.0.1:1)/test?parseTime=true",
	}
	t.Run("closed-port", func(t *testing.T) {
		for _, kind := range faultKinds {
			t.Run(kind, func(t *testing.T) {
				dsn := faultDSNFor(t, kind, baseDSN[kind], fmt.Sprintf("127.0.0.1:%d", faultClosedPort(t)), "")
				c := faultClient(t, faultStoreFor(t, kind, dsn))
				m := c.Mutex("x")
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				if _, err := m.TryLock(ctx); !errors.Is(err, distlock.ErrBackend) {
					t.Errorf("try-lock: %v, want ErrBackend", err)
				}
				if _, err := m.Inspect(ctx); !errors.Is(err, distlock.ErrBackend) {
					t.Errorf("inspect: %v, want ErrBackend", err)
				}
				if _, err := c.List(ctx, "*"); !errors.Is(err, distlock.ErrBackend) {
					t.Errorf("list: %v, want ErrBackend", err)
				}
				lctx, lcancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer lcancel()
				res := make(chan error, 1)
				go func() {
					l, err := m.Lock(lctx)
					if l != nil {
						_ = l.Unlock(context.Background())
					}
					res <- err
				}()
				select {
				case err := <-res:
					if !errors.Is(err, distlock.ErrBackend) && !(errors.Is(err, distlock.ErrNotAcquired) && errors.Is(err, context.DeadlineExceeded)) {
						t.Errorf("lock: %v, want ErrBackend", err)
					}
				case <-lctx.Done():
					select {
					case err := <-res:
						t.Logf("lock returned as its context ended: %v", err)
					case <-time.After(time.Second):
						t.Fatal("Lock with a context of 2 s on a closed port has not returned by then")
					}
				}
			})
		}
	})

	for _, kind := range faultKinds {
		t.Run(kind, func(t *testing.T) {
			d := startFaultDB(t, kind)
			t.Run("no-create-privilege", func(t *testing.T) {
				const user = "distlock_nocreate"
				if kind == "postgres" {
					admin, err := pgx.Connect(context.Background(), d.direct(t))
					if err != nil {
						t.Fatal(err)
					}
					defer admin.Close(context.Background())
					// PostgreSQL 15 revokes CREATE on public from PUBLIC
					// already; older ones do not.
					for _, q := range []string{`CREATE ROLE ` + user + ` LOGIN`, `REVOKE CREATE ON SCHEMA public FROM PUBLIC`} {
						if _, err := admin.Exec(context.Background(), q); err != nil {
							t.Fatal(err)
						}
					}
				} else {
					admin := mysqlDB(t, d.direct(t))
					for _, q := range []string{`CREATE USER '` + user + `'@'127.0.0.1'`,
						`GRANT SELECT, INSERT, UPDATE, DELETE ON test.* TO '` + user + `'@'127.0.0.1'`} {
						if _, err := admin.Exec(q); err != nil {
							t.Fatal(err)
						}
					}
				}
				c := faultClient(t, d.store(t, d.dsn(t, d.srv.Addr(), user)))
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_, err := c.Mutex("x").TryLock(ctx)
				if !errors.Is(err, distlock.ErrBackend) || !strings.Contains(err.Error(), "creating distlock's tables") {
					t.Errorf("first operation of a user who may not create tables: %v, want ErrBackend saying the tables could not be created", err)
				} else {
					t.Logf("%v", err)
				}
			})
			t.Run("without-migration", func(t *testing.T) {
				c := faultClient(t, d.store(t, d.direct(t), sqlstore.WithoutMigration(), sqlstore.WithTable("distlock_missing")))
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_, err := c.Mutex("x").TryLock(ctx)
				if !errors.Is(err, distlock.ErrBackend) || !strings.Contains(err.Error(), "distlock_missing") ||
					!(strings.Contains(err.Error(), "does not exist") || strings.Contains(err.Error(), "doesn't exist")) {
					t.Errorf("first operation without migration, tables missing: %v, want ErrBackend saying the table does not exist", err)
				} else {
					t.Logf("%v", err)
				}
			})
			t.Run("server-down", func(t *testing.T) {
				// A store that has made its tables, on a server that is
				// down: every step fails before anything reaches the
				// server, and says so (store.ErrUnsent: the Client then
				// has nothing to clean up, and its Close nothing to wait
				// for).
				var st *sqlstore.Store
				var drop func() // closes the pool's idle connections, dead with the server
				if kind == "postgres" {
					p := pool(t, d.direct(t))
					st, drop = sqlstore.NewPostgres(p), p.Reset
				} else {
					db := mysqlDB(t, d.direct(t))
					st, drop = sqlstore.NewMySQL(db), func() { db.SetMaxIdleConns(0) }
				}
				c := faultClient(t, st)
				faultUnlock(t, faultMustLock(t, c.Mutex("down"), 10*time.Second))
				if err := d.srv.Shutdown(); err != nil {
					t.Fatal(err)
				}
				drop()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				req := store.Request{Name: "down", Kind: store.Plain, Owner: "o", Hold: 1, Lease: time.Second, Seq: 1}
				_, err := st.Acquire(ctx, req)
				if !errors.Is(err, store.ErrBackend) || !errors.Is(err, store.ErrUnsent) {
					t.Errorf("Acquire on a server that is down: %v, want ErrBackend and ErrUnsent", err)
				}
				_, err = st.Release(ctx, req)
				if !errors.Is(err, store.ErrBackend) || !errors.Is(err, store.ErrUnsent) {
					t.Errorf("Release on a server that is down: %v, want ErrBackend and ErrUnsent", err)
				}
				if _, err := c.Mutex("down").TryLock(ctx); !errors.Is(err, distlock.ErrBackend) {
					t.Errorf("try-lock on a server that is down: %v, want ErrBackend", err)
				}
				// Nothing was sent: Close has nothing to wait for or give up on.
				if err := c.Close(); err != nil {
					t.Errorf("close after failures that sent nothing: %v", err)
				}
			})
		})
	}

	t.Run("invalid-options", func(t *testing.T) {
		p, err := pgxpool.New(context.Background(), baseDSN["postgres"]) // never used: no connection is made
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		db := mysqlDB(t, baseDSN["mariadb"])
		stores := []struct {
			name string
			st   func() *sqlstore.Store
		}{
			{"postgres-nil", func() *sqlstore.Store { return sqlstore.NewPostgres(nil) }},
			{"mysql-nil", func() *sqlstore.Store { return sqlstore.NewMySQL(nil) }},
			{"postgres-bad-table", func() *sqlstore.Store { return sqlstore.NewPostgres(p, sqlstore.WithTable("Bad-Name")) }},
			{"mysql-bad-table", func() *sqlstore.Store { return sqlstore.NewMySQL(db, sqlstore.WithTable("Bad-Name")) }},
			{"postgres-nil-bad-table", func() *sqlstore.Store { return sqlstore.NewPostgres(nil, sqlstore.WithTable("Bad-Name")) }},
			{"mysql-poll-interval", func() *sqlstore.Store { return sqlstore.NewMySQL(db, sqlstore.WithPollInterval(0)) }},
		}
		for _, tc := range stores {
			t.Run(tc.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				var st *sqlstore.Store
				faultNoPanic(t, "constructor", func() { st = tc.st() })
				if st == nil {
					t.Fatal("no store")
				}
				check := func(what string, err error) {
					t.Helper()
					if !errors.Is(err, distlock.ErrInvalidOption) {
						t.Errorf("%s: %v, want ErrInvalidOption", what, err)
					}
				}
				faultNoPanic(t, "store methods", func() {
					check("Err", st.Err())
					_, err := st.Acquire(ctx, store.Request{Name: "x", Kind: store.Plain, Owner: "o", Hold: 1, Lease: time.Second})
					check("Acquire", err)
					_, err = st.Inspect(ctx, "x")
					check("Inspect", err)
					_, err = st.List(ctx, "*")
					check("List", err)
					stop, err := st.Watch(ctx, "x", store.Plain, func(store.Notice) {})
					check("Watch", err)
					if stop != nil {
						stop()
					}
				})
				faultNoPanic(t, "client", func() {
					c := distlock.New(st, distlock.WithLogger(nil))
					check("Client.Err", c.Err())
					_, err := c.Mutex("x").Lock(ctx)
					check("Lock", err)
					_, err = c.Mutex("x").TryLock(ctx)
					check("TryLock", err)
					_, err = c.Mutex("x").Inspect(ctx)
					check("Inspect", err)
					_, err = c.List(ctx, "*")
					check("List", err)
					_ = c.Close()
				})
			})
		}
		_, err = sqlstore.PostgresSchema(sqlstore.WithTable("Bad-Name"))
		if !errors.Is(err, distlock.ErrInvalidOption) {
			t.Errorf("PostgresSchema with a bad table name: %v, want ErrInvalidOption", err)
		}
		_, err = sqlstore.MySQLSchema(sqlstore.WithTable("Bad-Name"))
		if !errors.Is(err, distlock.ErrInvalidOption) {
			t.Errorf("MySQLSchema with a bad table name: %v, want ErrInvalidOption", err)
		}
	})
}

// faultStaller makes connections on which one step's transaction is cut
// off by a network partition right after its SELECT … FOR UPDATE went
// out: the database runs it and holds the row, and hears nothing more
// from that connection (its replies, later requests and close are lost)
// until heal, as with a real partition, where the server learns of the
// dead peer only from TCP keepalive, hours later by default.
type faultStaller struct {
	// prepared: the driver prepares a statement in a round trip of its
	// own before it runs it (pgx's statement cache): the write after the
	// one that carries the text runs it.
	prepared bool
	// marker is in the text of the step's first statement: its SELECT …
	// FOR UPDATE on PostgreSQL; on MySQL, whose steps hold no row across
	// round trips, its plain read.
	marker  []byte
	armed   atomic.Bool // the next marked statement run is the last request to go out
	stalled atomic.Int32
	mu      sync.Mutex
	kept    []net.Conn // the stalled connections, closed at heal
}

func (s *faultStaller) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &faultStallConn{Conn: c, s: s}, nil
}

// heal ends the partition: the database sees the stalled connections
// close, and rolls their transactions back.
func (s *faultStaller) heal() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.kept {
		_ = c.Close()
	}
	s.kept = nil
}

type faultStallConn struct {
	net.Conn
	s        *faultStaller
	prepared bool // a FOR UPDATE was prepared on it (the next write runs it)
	stalled  atomic.Bool
}

func (c *faultStallConn) Write(b []byte) (int, error) {
	if c.stalled.Load() {
		return len(b), nil // lost in the partition
	}
	run := c.prepared
	if bytes.Contains(b, c.s.marker) {
		c.prepared, run = c.s.prepared, !c.s.prepared
	}
	if run && c.s.armed.CompareAndSwap(true, false) {
		c.stalled.Store(true) // before the reply can come
		c.s.stalled.Add(1)
		c.s.mu.Lock()
		c.s.kept = append(c.s.kept, c.Conn)
		c.s.mu.Unlock()
	}
	return c.Conn.Write(b)
}

func (c *faultStallConn) Read(b []byte) (int, error) {
	for {
		n, err := c.Conn.Read(b)
		if err != nil || !c.stalled.Load() {
			return n, err
		}
		// The reply is lost in the partition.
	}
}

func (c *faultStallConn) Close() error {
	if !c.stalled.Load() {
		return c.Conn.Close()
	}
	// This side gives up; the server hears nothing until heal closes it.
	return c.Conn.SetDeadline(time.Now())
}

// stallingStore returns a store on dsn whose connections stall as s says.
func (d *faultDB) stallingStore(t testing.TB, dsn string, s *faultStaller) *sqlstore.Store {
	t.Helper()
	if d.kind == "postgres" {
		cfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		cfg.ConnConfig.DialFunc = s.dial
		p, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return sqlstore.NewPostgres(p)
	}
	cfg, err := mysqldrv.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DialFunc = s.dial
	conn, err := mysqldrv.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	t.Cleanup(func() { db.Close() })
	return sqlstore.NewMySQL(db)
}

// TestFaultStalledStep cuts one client off by a network partition in the
// middle of a step: its first statement reached the database (on
// PostgreSQL its SELECT … FOR UPDATE, which holds the lock's row for that
// transaction until the server's idle-in-transaction timeout ends the
// session; on MySQL a plain read, which holds nothing), and nothing more
// comes from that client. Another client, healthy and directly connected, holds the
// lock with a lease of 2 s: its renewals must go on (three of them, with
// its lease context live), not wait behind the dead transaction until
// its lease is lost. The cut-off client's TryLock returns a typed error.
func TestFaultStalledStep(t *testing.T) {
	for _, kind := range faultKinds {
		t.Run(kind, func(t *testing.T) {
			d := startFaultDB(t, kind)
			const lease = 2 * time.Second
			const name = "stalled"
			hEv := &faultEvents{}
			H := faultClient(t, d.store(t, d.direct(t)), distlock.WithEventHandler(hEv.add))
			lh := faultMustLock(t, H.Mutex(name, distlock.WithTTL(lease)), 10*time.Second)
			s := &faultStaller{prepared: kind == "postgres", marker: []byte("FOR UPDATE")}
			if kind != "postgres" {
				s.marker = []byte("SELECT name, token, rev, state")
			}
			W := faultClient(t, d.stallingStore(t, d.tagged(t, d.srv.Addr(), "distlock_stalled"), s))
			t.Cleanup(s.heal) // before the Clients are closed
			// W's tables check and first connection, before the cut.
			if _, err := W.Mutex(name).Inspect(context.Background()); err != nil {
				t.Fatal(err)
			}
			s.armed.Store(true)
			renewed := hEv.count(distlock.EventRenewed, name)
			wres := make(chan error, 1)
			wctx, wcancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer wcancel()
			wDeadline, _ := wctx.Deadline()
			go func() {
				l, err := W.Mutex(name, distlock.WithTTL(lease)).TryLock(wctx)
				if l != nil {
					_ = l.Unlock(context.Background())
				}
				wres <- err
			}()
			faultEventually(t, 10*time.Second, "the step's first statement sent", func() bool { return s.stalled.Load() > 0 })

			// The healthy holder renews three times, or loses the lock.
			faultEventually(t, 20*time.Second, "three renewals or the loss", func() bool {
				return hEv.count(distlock.EventRenewed, name) >= renewed+3 || lh.Context().Err() != nil
			})
			lost := lh.Context().Err() != nil
			select {
			case err := <-wres:
				if !errors.Is(err, distlock.ErrBackend) && !errors.Is(err, distlock.ErrNotAcquired) {
					t.Errorf("the cut-off client's TryLock: %v, want a typed error", err)
				}
			case <-time.After(time.Until(wDeadline) + 8*time.Second):
				t.Fatal("the cut-off client's TryLock hangs past its context")
			}
			s.heal()
			if lost {
				t.Errorf("the healthy holder lost its lock (%v) behind the transaction of a client cut off in the middle of a step",
					context.Cause(lh.Context()))
				return
			}
			faultUnlock(t, lh)
		})
	}
}
