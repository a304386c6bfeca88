// Package sqlbench benchmarks distlock's SQL store (sqlstore) against SQL
// lock libraries on real PostgreSQL and MariaDB servers that it starts
// itself (package sqltest), in one run: uncontended pairs, parallel
// uncontended pairs, contended owner changes with Jain's fairness index,
// hand-over latency, and the database's CPU per pair. See cmd/sqlbench
// and ../../README.md.
package sqlbench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"cirello.io/pglock"
	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sqlstore"
	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	gomysqllock "github.com/sanketplus/go-mysql-lock"
)

// The libraries.
const (
	// Advisory is the PostgreSQL baseline: pg_advisory_lock(key) /
	// pg_advisory_unlock(key) on a connection pinned to the goroutine
	// (the lock belongs to the session), key a 64-bit hash of the name.
	Advisory = "advisory"
	// DistlockPG is distlock's Mutex on sqlstore.NewPostgres (waiters
	// hear releases through LISTEN/NOTIFY), library defaults (lease 30 s).
	DistlockPG = "distlock-pg"
	// DistlockPGPoll is the same WithoutNotify: waiters poll every 50 ms.
	DistlockPGPoll = "distlock-pg-poll"
	// PGLock is cirello.io/pglock v1.16.1 (a row per lock, a waiter
	// retries once per lease), lease 30 s and heartbeat 10 s as
	// distlock's default lease and its renewal at most every third of it.
	PGLock = "pglock"
	// MySQLLock is the MariaDB baseline:
	// github.com/sanketplus/go-mysql-lock v0.0.7 (GET_LOCK on a
	// connection held while the lock is; see MySQLLockTimeout).
	MySQLLock = "mysqllock"
	// DistlockMariaDB is distlock's Mutex on sqlstore.NewMySQL
	// (go-sql-driver/mysql), library defaults: waiters poll every 50 ms.
	DistlockMariaDB = "distlock-mariadb"
	// AdvisoryTx is a diagnostic (scenario d only): Advisory plus, at
	// the acquisition and at the release, one committed write of a row
	// (an upsert in autocommit), so 2 commits and 4 round trips per pair
	// as distlock-pg has.
	AdvisoryTx = "advisory-tx"
)

// Libs are the libraries of scenarios a, b, c and e, in report order.
var Libs = []string{Advisory, DistlockPG, DistlockPGPoll, PGLock, MySQLLock, DistlockMariaDB}

// Server is which database a library runs on.
func Server(lib string) string {
	switch lib {
	case MySQLLock, DistlockMariaDB:
		return "mariadb"
	}
	return "postgres"
}

// Baseline is the library that lib's ratios refer to: Advisory on
// PostgreSQL, MySQLLock on MariaDB.
func Baseline(lib string) string {
	if Server(lib) == "mariadb" {
		return MySQLLock
	}
	return Advisory
}

// Title is how a library is named in reports.
func Title(lib string) string {
	switch lib {
	case Advisory:
		return "pg_advisory_lock (PG baseline)"
	case DistlockPG:
		return "distlock-pg (LISTEN)"
	case DistlockPGPoll:
		return "distlock-pg-poll (WithoutNotify)"
	case PGLock:
		return "cirello.io/pglock (PG)"
	case MySQLLock:
		return "go-mysql-lock (MariaDB baseline)"
	case DistlockMariaDB:
		return "distlock-mariadb"
	case AdvisoryTx:
		return "advisory + 2 commits (diagnostic)"
	}
	return lib
}

// PGLockLease and PGLockHeartbeat are pglock's settings.
const (
	PGLockLease     = 30 * time.Second
	PGLockHeartbeat = 10 * time.Second
)

// An Unlock releases a lock.
type Unlock func(ctx context.Context) error

// A Locker is one library's client: its own pool of connections (as a
// process of its own would have). Its Workers are what one goroutine uses.
type Locker interface {
	// Worker returns what one goroutine locks with: for Advisory, a
	// connection of its own; for the others, the shared client.
	Worker() (Worker, error)
	// ResetWaiting forgets that a Lock of this Locker waited; then
	// AwaitWaiting returns once a Lock of this Locker on name waits for
	// the lock (distlock: its EventWaiting; pglock: its first failed
	// attempt; advisory and mysqllock: the server shows the session
	// waiting, polled every millisecond).
	ResetWaiting()
	AwaitWaiting(ctx context.Context, name string) error
	Close() error
}

// A Worker takes locks for one goroutine.
type Worker interface {
	Lock(ctx context.Context, name string) (Unlock, error)
	Close() error
}

// DSNs are the servers' addresses (sqltest's DSN methods).
type DSNs struct {
	Postgres string
	MariaDB  string
}

// Options tune a Locker.
type Options struct {
	// Conns is how many goroutines will lock at once through the Locker:
	// its pool holds that many connections (at least 4), plus one.
	Conns int
}

func (o Options) poolSize() int { return max(o.Conns, 4) + 1 }

// NewLocker returns a Locker of lib with a pool of its own on the server
// of dsns.
func NewLocker(lib string, dsns DSNs, o Options) (Locker, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	switch lib {
	case Advisory, AdvisoryTx:
		pool, err := pgPool(ctx, dsns.Postgres, o.poolSize())
		if err != nil {
			return nil, err
		}
		a := &advLocker{pool: pool, tx: lib == AdvisoryTx}
		if a.tx {
			if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS sqlbench_durable (k bigint PRIMARY KEY, n bigint NOT NULL)`); err != nil {
				pool.Close()
				return nil, err
			}
		}
		return a, nil
	case DistlockPG, DistlockPGPoll:
		pool, err := pgPool(ctx, dsns.Postgres, o.poolSize())
		if err != nil {
			return nil, err
		}
		var opts []sqlstore.Option
		if lib == DistlockPGPoll {
			opts = append(opts, sqlstore.WithoutNotify())
		}
		return newDistLocker(ctx, sqlstore.NewPostgres(pool, opts...), pool.Close)
	case DistlockMariaDB:
		db, err := myDB(ctx, dsns.MariaDB, o.poolSize())
		if err != nil {
			return nil, err
		}
		return newDistLocker(ctx, sqlstore.NewMySQL(db), func() { _ = db.Close() })
	case PGLock:
		db, err := pgDB(ctx, dsns.Postgres, o.poolSize())
		if err != nil {
			return nil, err
		}
		p := &pgLocker{db: db, waiting: make(chan struct{}, 1)}
		// pglock.New accepts lib/pq only; UnsafeNew takes pgx's
		// database/sql driver (its errors are read through SQLState).
		p.c, err = pglock.UnsafeNew(db, pglock.WithLeaseDuration(PGLockLease),
			pglock.WithHeartbeatFrequency(PGLockHeartbeat), pglock.WithLevelLogger(waitLogger{p.waiting}))
		if err == nil {
			err = p.c.TryCreateTable()
		}
		if err != nil {
			_ = p.Close()
			return nil, err
		}
		return p, nil
	case MySQLLock:
		db, err := myDB(ctx, dsns.MariaDB, o.poolSize())
		if err != nil {
			return nil, err
		}
		return &myLocker{db: db, l: gomysqllock.NewMysqlLocker(db)}, nil
	}
	return nil, fmt.Errorf("unknown library %q", lib)
}

func pgPool(ctx context.Context, dsn string, conns int) (*pgxpool.Pool, error) {
	if dsn == "" {
		return nil, errors.New("no PostgreSQL server")
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = int32(conns)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// pgDB opens a database/sql pool of pgx connections (pgx's stdlib). A
// query whose context ends is cancelled as lib/pq does it (pglock's own
// driver): by a cancel request, keeping the connection, rather than by
// pgx's default, which closes the connection. pglock cancels the context
// of a lock's heartbeats when the lock is released, and its first
// heartbeat starts as the lock is taken. (In our runs that made no
// measurable difference: the release rarely catches a heartbeat on its
// way.)
func pgDB(ctx context.Context, dsn string, conns int) (*sql.DB, error) {
	if dsn == "" {
		return nil, errors.New("no PostgreSQL server")
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: pc, DeadlineDelay: 5 * time.Second}
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, err
	}
	return db, nil
}

func myDB(ctx context.Context, dsn string, conns int) (*sql.DB, error) {
	if dsn == "" {
		return nil, errors.New("no MariaDB server")
	}
	cfg, err := mysqldriver.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	conn, err := mysqldriver.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns) // database/sql keeps 2 by default: the others would be reopened again and again
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, err
	}
	return db, nil
}

// Key is the advisory lock key of a name: FNV-1a, 64 bits.
func Key(name string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return int64(h.Sum64())
}

// signal sends on a 1-buffered channel without blocking.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func drain(c chan struct{}) {
	select {
	case <-c:
	default:
	}
}

func await(ctx context.Context, c chan struct{}) error {
	select {
	case <-c:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("the waiter never waited: %w", ctx.Err())
	}
}

// poll calls f every millisecond until it reports true.
func poll(ctx context.Context, f func() (bool, error)) error {
	for {
		ok, err := f()
		if err != nil || ok {
			return err
		}
		select {
		case <-time.After(time.Millisecond):
		case <-ctx.Done():
			return fmt.Errorf("the waiter never waited: %w", ctx.Err())
		}
	}
}

// --- distlock on sqlstore: one Client per Locker, shared by its goroutines.

type distLocker struct {
	c       *distlock.Client
	closeDB func()
	waiting chan struct{}
}

func newDistLocker(ctx context.Context, s *sqlstore.Store, closeDB func()) (*distLocker, error) {
	d := &distLocker{closeDB: closeDB, waiting: make(chan struct{}, 1)}
	d.c = distlock.New(s, distlock.WithLogger(nil), distlock.WithEventHandler(func(e distlock.Event) {
		if e.Kind == distlock.EventWaiting {
			signal(d.waiting)
		}
	}))
	// One pair first: the store creates its tables on first use.
	u, err := d.Lock(ctx, "sqlbench/probe")
	if err == nil {
		err = u(ctx)
	}
	if err != nil {
		_ = d.Close()
		return nil, err
	}
	return d, nil
}

func (d *distLocker) Lock(ctx context.Context, name string) (Unlock, error) {
	l, err := d.c.Mutex(name).Lock(ctx)
	if err != nil {
		return nil, err
	}
	return l.Unlock, nil
}

func (d *distLocker) Worker() (Worker, error) { return sharedWorker{d.Lock}, nil }
func (d *distLocker) ResetWaiting()           { drain(d.waiting) }
func (d *distLocker) AwaitWaiting(ctx context.Context, _ string) error {
	return await(ctx, d.waiting)
}
func (d *distLocker) Close() error {
	err := d.c.Close()
	d.closeDB()
	return err
}

// sharedWorker is a client shared by every goroutine of a Locker
// (closing a worker closes nothing).
type sharedWorker struct {
	lock func(ctx context.Context, name string) (Unlock, error)
}

func (w sharedWorker) Lock(ctx context.Context, name string) (Unlock, error) {
	return w.lock(ctx, name)
}
func (w sharedWorker) Close() error { return nil }

// --- pg_advisory_lock: a pinned connection per Worker.

type advLocker struct {
	pool *pgxpool.Pool
	tx   bool // AdvisoryTx
}

func (a *advLocker) Worker() (Worker, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := a.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	return &advWorker{c: c, tx: a.tx}, nil
}

func (a *advLocker) ResetWaiting() {}

// AwaitWaiting polls pg_locks for an ungranted advisory lock of name's
// key (a bigint key is classid: its high 32 bits, objid: its low ones,
// objsubid 1).
func (a *advLocker) AwaitWaiting(ctx context.Context, name string) error {
	k := uint64(Key(name))
	return poll(ctx, func() (bool, error) {
		var n int
		err := a.pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
			AND classid::text::bigint = $1 AND objid::text::bigint = $2 AND objsubid = 1`, int64(k>>32), int64(k&0xffffffff)).Scan(&n)
		return n > 0, err
	})
}

func (a *advLocker) Close() error { a.pool.Close(); return nil }

type advWorker struct {
	c  *pgxpool.Conn
	tx bool
}

const durableWrite = `INSERT INTO sqlbench_durable (k, n) VALUES ($1, 1) ON CONFLICT (k) DO UPDATE SET n = sqlbench_durable.n + 1`

func (w *advWorker) Lock(ctx context.Context, name string) (Unlock, error) {
	k := Key(name)
	if _, err := w.c.Exec(ctx, `SELECT pg_advisory_lock($1)`, k); err != nil {
		return nil, err
	}
	if w.tx {
		if _, err := w.c.Exec(ctx, durableWrite, k); err != nil {
			return nil, err
		}
	}
	return func(ctx context.Context) error {
		if w.tx {
			if _, err := w.c.Exec(ctx, durableWrite, k); err != nil {
				return err
			}
		}
		var ok bool
		if err := w.c.QueryRow(ctx, `SELECT pg_advisory_unlock($1)`, k).Scan(&ok); err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("pg_advisory_unlock(%d): not held", k)
		}
		return nil
	}, nil
}

func (w *advWorker) Close() error { w.c.Release(); return nil }

// --- cirello.io/pglock: one Client per Locker.

type pgLocker struct {
	db      *sql.DB
	c       *pglock.Client
	waiting chan struct{}
}

func (p *pgLocker) Lock(ctx context.Context, name string) (Unlock, error) {
	l, err := p.c.AcquireContext(ctx, name)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { return p.c.ReleaseContext(ctx, l) }, nil
}

func (p *pgLocker) Worker() (Worker, error) { return sharedWorker{p.Lock}, nil }
func (p *pgLocker) ResetWaiting()           { drain(p.waiting) }
func (p *pgLocker) AwaitWaiting(ctx context.Context, _ string) error {
	return await(ctx, p.waiting)
}
func (p *pgLocker) Close() error { return p.db.Close() }

// waitLogger hears pglock's debug line for a failed attempt, after which
// the waiter sleeps a lease before it tries again.
type waitLogger struct{ waiting chan struct{} }

func (w waitLogger) Debug(msg string, _ ...any) {
	if strings.HasPrefix(msg, "not acquired, wait") {
		signal(w.waiting)
	}
}
func (w waitLogger) Error(string, ...any) {}

// --- go-mysql-lock: GET_LOCK on a connection of the pool held with the lock.

// MySQLLockTimeout is the GET_LOCK timeout, in seconds, that mysqllock
// waits with: its Obtain and ObtainContext pass -1 (no timeout), which
// MariaDB 10.11 answers with NULL (the library's ErrMySQLInternalError),
// so the wait is bounded by a timeout no run reaches (its own tests use
// 100000 on MariaDB).
const MySQLLockTimeout = 100000

type myLocker struct {
	db *sql.DB
	l  *gomysqllock.MysqlLocker
}

func (m *myLocker) Lock(ctx context.Context, name string) (Unlock, error) {
	l, err := m.l.ObtainTimeoutContext(ctx, name, MySQLLockTimeout)
	if err != nil {
		return nil, err
	}
	return func(context.Context) error { return l.Release() }, nil
}

func (m *myLocker) Worker() (Worker, error) { return sharedWorker{m.Lock}, nil }
func (m *myLocker) ResetWaiting()           {}

// AwaitWaiting polls the process list for a session waiting in GET_LOCK
// (state "User lock"; the hand-over has one waiter at a time).
func (m *myLocker) AwaitWaiting(ctx context.Context, _ string) error {
	return poll(ctx, func() (bool, error) {
		var n int
		err := m.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE = 'User lock'`).Scan(&n)
		return n > 0, err
	})
}

func (m *myLocker) Close() error { return m.db.Close() }
