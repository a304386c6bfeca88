package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sqlstore"
	"github.com/distlock/distlock/sqltest"
	"github.com/distlock/distlock/store"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib"
)

// An ltxBackend is a database the LockTx tests run on, and the kind of
// transaction the caller gives LockTx.
type ltxBackend struct {
	pg bool // PostgreSQL: $n placeholders
	// newStore returns a store of its own on the shared pool or db.
	newStore func(t *testing.T) *sqlstore.Store
	// start begins a caller's transaction at iso (sql.LevelDefault: the
	// server's default).
	start func(ctx context.Context, iso sql.IsolationLevel) (*ltxTx, error)
	// admin runs statements outside any transaction.
	admin ltxConn
	// shortLockWait is the SQL that makes a transaction's lock waits end
	// after a moment, and restoreLockWait undoes it ("" if nothing is
	// needed).
	shortLockWait, restoreLockWait string
	// poll is how often to look at the server's lock waits: MariaDB
	// refreshes information_schema.INNODB_TRX only if it was not read in
	// the last 100 ms.
	poll time.Duration
}

// ltxConn runs statements with ? placeholders.
type ltxConn interface {
	exec(ctx context.Context, q string, args ...any) error
	scan(ctx context.Context, q string, args []any, dest ...any) error
}

// An ltxTx is a caller's transaction.
type ltxTx struct {
	ltxConn
	tx       any
	id       int64 // the server's id of its connection: backend pid, connection id
	commit   func() error
	rollback func() error
}

func (b *ltxBackend) rebind(q string) string {
	if !b.pg {
		return q
	}
	var sb strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			fmt.Fprintf(&sb, "$%d", n)
			continue
		}
		sb.WriteRune(r)
	}
	return sb.String()
}

// ltxPgxQuerier is a pgx pool or transaction.
type ltxPgxQuerier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ltxPgxConn runs statements on a pgx pool or transaction.
type ltxPgxConn struct {
	b *ltxBackend
	q ltxPgxQuerier
}

func (c ltxPgxConn) exec(ctx context.Context, q string, args ...any) error {
	_, err := c.q.Exec(ctx, c.b.rebind(q), args...)
	return err
}

func (c ltxPgxConn) scan(ctx context.Context, q string, args []any, dest ...any) error {
	return c.q.QueryRow(ctx, c.b.rebind(q), args...).Scan(dest...)
}

// ltxSQLConn runs statements on a *sql.DB or *sql.Tx.
type ltxSQLConn struct {
	b *ltxBackend
	q interface {
		ExecContext(context.Context, string, ...any) (sql.Result, error)
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}
}

func (c ltxSQLConn) exec(ctx context.Context, q string, args ...any) error {
	_, err := c.q.ExecContext(ctx, c.b.rebind(q), args...)
	return err
}

func (c ltxSQLConn) scan(ctx context.Context, q string, args []any, dest ...any) error {
	return c.q.QueryRowContext(ctx, c.b.rebind(q), args...).Scan(dest...)
}

// waiting reports whether the connection id waits for a lock.
func (b *ltxBackend) waiting(ctx context.Context, id int64) (bool, error) {
	var n int64
	q := `SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = ? AND trx_state = 'LOCK WAIT'`
	if b.pg {
		q = `SELECT COUNT(*) FROM pg_stat_activity WHERE pid = ? AND wait_event_type = 'Lock'`
	}
	err := b.admin.scan(ctx, q, []any{id}, &n)
	return n > 0, err
}

// blockedBy counts the transactions waiting for a lock that the
// connection id holds.
func (b *ltxBackend) blockedBy(ctx context.Context, id int64) (int64, error) {
	var n int64
	q := `SELECT COUNT(*) FROM information_schema.INNODB_LOCK_WAITS w
		JOIN information_schema.INNODB_TRX h ON h.trx_id = w.blocking_trx_id WHERE h.trx_mysql_thread_id = ?`
	if b.pg {
		q = `SELECT COUNT(*) FROM pg_stat_activity WHERE ?::int = ANY(pg_blocking_pids(pid))`
	}
	err := b.admin.scan(ctx, q, []any{id}, &n)
	return n, err
}

// transactions describes the server's transactions and their lock
// waits, for failures.
func (b *ltxBackend) transactions() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	qs := []string{`SELECT COALESCE(string_agg(concat_ws(' ', pid, state, wait_event_type, wait_event, query,
		'blocked by', pg_blocking_pids(pid)::text), E'\n'), '') FROM pg_stat_activity WHERE backend_type = 'client backend'`}
	if !b.pg {
		qs = []string{`SELECT COALESCE(GROUP_CONCAT(CONCAT_WS(' ', 'connection', ID, COMMAND, STATE, TIME, INFO)
			SEPARATOR '\n'), '') FROM information_schema.PROCESSLIST`}
	}
	var out []string
	for _, q := range qs {
		var s string
		if err := b.admin.scan(ctx, q, nil, &s); err != nil {
			s = err.Error()
		}
		out = append(out, s)
	}
	if !b.pg {
		// Not information_schema.INNODB_TRX: a cache, refreshed only if
		// it was not read in the last 100 ms.
		var typ, name, status string
		if err := b.admin.scan(ctx, `SHOW ENGINE INNODB STATUS`, nil, &typ, &name, &status); err == nil {
			if i := strings.Index(status, "TRANSACTIONS\n"); i >= 0 {
				status = status[i:]
			}
			if i := strings.Index(status, "--------\nFILE I/O"); i >= 0 {
				status = status[:i]
			}
			out = append(out, status)
		}
	}
	return strings.Join(out, "\n")
}

// kill ends the connection id from another connection.
func (b *ltxBackend) kill(ctx context.Context, id int64) error {
	if b.pg {
		var ok bool
		if err := b.admin.scan(ctx, `SELECT pg_terminate_backend(?::int)`, []any{id}, &ok); err != nil || !ok {
			return fmt.Errorf("pg_terminate_backend(%d): %v, %w", id, ok, err)
		}
		return nil
	}
	return b.admin.exec(ctx, fmt.Sprintf("KILL %d", id))
}

func newLtxPostgres(t *testing.T, dsn string) *ltxBackend {
	// Connections for the transactions of FirstUseConcurrent, all open
	// at once.
	p := pool(t, dsn+"&pool_max_conns=32")
	b := &ltxBackend{pg: true, shortLockWait: `SET LOCAL lock_timeout = '100ms'`, poll: 5 * time.Millisecond}
	b.admin = ltxPgxConn{b, p}
	b.newStore = func(t *testing.T) *sqlstore.Store {
		s := sqlstore.NewPostgres(p)
		t.Cleanup(func() { s.Close() })
		return s
	}
	b.start = func(ctx context.Context, iso sql.IsolationLevel) (*ltxTx, error) {
		opts := pgx.TxOptions{}
		if iso != sql.LevelDefault {
			opts.IsoLevel = pgx.TxIsoLevel(strings.ToLower(iso.String()))
		}
		tx, err := p.BeginTx(ctx, opts)
		if err != nil {
			return nil, err
		}
		x := &ltxTx{ltxConn: ltxPgxConn{b, tx}, tx: tx,
			commit:   func() error { return tx.Commit(context.Background()) },
			rollback: func() error { return tx.Rollback(context.Background()) }}
		return x.started(ctx, `SELECT pg_backend_pid()`)
	}
	return b
}

func newLtxPostgresStdlib(t *testing.T, dsn string) *ltxBackend {
	p := pool(t, dsn)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	b := &ltxBackend{pg: true, shortLockWait: `SET LOCAL lock_timeout = '100ms'`, poll: 5 * time.Millisecond}
	b.admin = ltxSQLConn{b, db}
	b.newStore = func(t *testing.T) *sqlstore.Store {
		s := sqlstore.NewPostgres(p)
		t.Cleanup(func() { s.Close() })
		return s
	}
	b.start = func(ctx context.Context, iso sql.IsolationLevel) (*ltxTx, error) {
		return ltxSQLBegin(ctx, b, db, iso, `SELECT pg_backend_pid()`)
	}
	return b
}

func newLtxMariaDB(t *testing.T, dsn string) *ltxBackend {
	db := mysqlDB(t, dsn)
	b := &ltxBackend{shortLockWait: `SET SESSION innodb_lock_wait_timeout = 1`,
		restoreLockWait: `SET SESSION innodb_lock_wait_timeout = DEFAULT`, poll: 150 * time.Millisecond}
	b.admin = ltxSQLConn{b, db}
	b.newStore = func(t *testing.T) *sqlstore.Store {
		s := sqlstore.NewMySQL(db)
		t.Cleanup(func() { s.Close() })
		return s
	}
	b.start = func(ctx context.Context, iso sql.IsolationLevel) (*ltxTx, error) {
		return ltxSQLBegin(ctx, b, db, iso, `SELECT CONNECTION_ID()`)
	}
	return b
}

func ltxSQLBegin(ctx context.Context, b *ltxBackend, db *sql.DB, iso sql.IsolationLevel, idQuery string) (*ltxTx, error) {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: iso})
	if err != nil {
		return nil, err
	}
	x := &ltxTx{ltxConn: ltxSQLConn{b, tx}, tx: tx, commit: tx.Commit, rollback: tx.Rollback}
	return x.started(ctx, idQuery)
}

// started reads the transaction's connection id with idQuery.
func (x *ltxTx) started(ctx context.Context, idQuery string) (*ltxTx, error) {
	if err := x.scan(ctx, idQuery, nil, &x.id); err != nil {
		_ = x.rollback()
		return nil, err
	}
	return x, nil
}

// begin starts a caller's transaction at the server's default isolation,
// rolled back when the test ends if it is still open.
func (b *ltxBackend) begin(t *testing.T, ctx context.Context) *ltxTx {
	t.Helper()
	return b.beginAt(t, ctx, sql.LevelDefault)
}

// beginAt is begin at iso.
func (b *ltxBackend) beginAt(t *testing.T, ctx context.Context, iso sql.IsolationLevel) *ltxTx {
	t.Helper()
	x, err := b.start(ctx, iso)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = x.rollback() })
	return x
}

// TestLockTxPostgres runs the LockTx tests on PostgreSQL with pgx.Tx, and
// with *sql.Tx of pgx's database/sql driver.
func TestLockTxPostgres(t *testing.T) {
	pg := sqltest.StartPostgres(t)
	t.Run("pgx", func(t *testing.T) { runLockTx(t, newLtxPostgres(t, pg.DSN())) })
	t.Run("stdlib", func(t *testing.T) { runLockTx(t, newLtxPostgresStdlib(t, pg.DSN())) })
}

// TestLockTxMariaDB runs the LockTx tests on MariaDB, with transactions
// at its default isolation, REPEATABLE READ.
func TestLockTxMariaDB(t *testing.T) {
	m := sqltest.StartMariaDB(t)
	b := newLtxMariaDB(t, m.DSN())
	var iso string
	if err := b.admin.scan(context.Background(), `SELECT @@tx_isolation`, nil, &iso); err != nil {
		t.Fatal(err)
	}
	if iso != "REPEATABLE-READ" {
		t.Fatalf("MariaDB's default isolation is %s, want REPEATABLE-READ", iso)
	}
	runLockTx(t, b)
}

func runLockTx(t *testing.T, b *ltxBackend) {
	ctx := context.Background()
	for _, q := range []string{
		`CREATE TABLE IF NOT EXISTS locktx_counter (name varchar(200) PRIMARY KEY, n bigint NOT NULL, token bigint NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS locktx_fenced (name varchar(200) PRIMARY KEY, token bigint NOT NULL)`,
	} {
		if err := b.admin.exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("Exclusion", func(t *testing.T) { testLockTxExclusion(t, b) })
	t.Run("EndsWithRollback", func(t *testing.T) { testLockTxEndsWithRollback(t, b) })
	t.Run("EndsWithKill", func(t *testing.T) { testLockTxEndsWithKill(t, b) })
	t.Run("Tokens", func(t *testing.T) { testLockTxTokens(t, b) })
	t.Run("LeaseHeld", func(t *testing.T) { testLockTxLeaseHeld(t, b) })
	t.Run("LeaseWaits", func(t *testing.T) { testLockTxLeaseWaits(t, b) })
	t.Run("QueuedWithLease", func(t *testing.T) { testLockTxQueuedWithLease(t, b) })
	t.Run("FirstUseConcurrent", func(t *testing.T) { testLockTxFirstUseConcurrent(t, b) })
	t.Run("Invalid", func(t *testing.T) { testLockTxInvalid(t, b) })
	t.Run("RepeatableRead", func(t *testing.T) { testLockTxRepeatableRead(t, b) })
}

// ltxCtx is the context of a test: it ends with the test, or after a
// minute.
func ltxCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func mustLockTx(t *testing.T, ctx context.Context, s *sqlstore.Store, x *ltxTx, name string) uint64 {
	t.Helper()
	tok, err := s.LockTx(ctx, x.tx, name)
	if err != nil {
		t.Fatalf("LockTx: %v", err)
	}
	if tok == 0 {
		t.Fatal("LockTx: token 0")
	}
	return tok
}

type lockTxResult struct {
	token uint64
	err   error
}

// lockTxAsync runs LockTx in a goroutine; its result comes on the
// channel.
func lockTxAsync(ctx context.Context, s *sqlstore.Store, x *ltxTx, name string) <-chan lockTxResult {
	ch := make(chan lockTxResult, 1)
	go func() {
		tok, err := s.LockTx(ctx, x.tx, name)
		ch <- lockTxResult{tok, err}
	}()
	return ch
}

// await polls cond until it holds, failing the test after 20 s.
func (b *ltxBackend) await(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 20s; the server's transactions:\n%s", what, b.transactions())
		}
		time.Sleep(b.poll)
	}
}

// ltxAwaitWaiting waits until x waits for a lock in the database.
func ltxAwaitWaiting(t *testing.T, ctx context.Context, b *ltxBackend, x *ltxTx) {
	t.Helper()
	b.await(t, "the transaction waits for the row lock", func() (bool, error) { return b.waiting(ctx, x.id) })
}

// receive returns the result from ch, failing the test if none comes
// before ctx ends.
func ltxReceive[T any](t *testing.T, ctx context.Context, b *ltxBackend, ch <-chan T) T {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
		t.Fatalf("no result before the test's deadline; the server's transactions:\n%s", b.transactions())
		panic("unreachable")
	}
}

// notYet fails the test if ch has a result already.
func ltxNotYet[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s while the lock was held: %+v", what, r)
	default:
	}
}

// testLockTxExclusion: a second transaction's LockTx of the name blocks
// until the first commits (a ctx deadline, and the database's lock wait
// timeout, end its wait with ErrNotAcquired), then gets a higher token.
func testLockTxExclusion(t *testing.T, b *ltxBackend) {
	ctx, s, name := ltxCtx(t), b.newStore(t), t.Name()
	tx1 := b.begin(t, ctx)
	tok1 := mustLockTx(t, ctx, s, tx1, name)

	// A short ctx ends the wait.
	tx2 := b.begin(t, ctx)
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	start := time.Now()
	_, err := s.LockTx(short, tx2.tx, name)
	cancel()
	if !errors.Is(err, store.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("LockTx with a short ctx on a held name: %v, want ErrNotAcquired and DeadlineExceeded", err)
	}
	t.Logf("ctx deadline: %v after %v", err, time.Since(start))
	_ = tx2.rollback() // its connection was closed by the driver

	// So does the database's lock wait timeout.
	tx3 := b.begin(t, ctx)
	if err := tx3.exec(ctx, b.shortLockWait); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	_, err = s.LockTx(ctx, tx3.tx, name)
	if !errors.Is(err, store.ErrNotAcquired) || errors.Is(err, store.ErrBackend) || ctx.Err() != nil {
		t.Fatalf("LockTx past the lock wait timeout: %v, want ErrNotAcquired", err)
	}
	t.Logf("lock wait timeout: %v after %v", err, time.Since(start))
	if b.restoreLockWait != "" {
		// MySQL ends only the statement: the transaction goes on.
		if err := tx3.exec(ctx, b.restoreLockWait); err != nil {
			t.Fatalf("the transaction after a lock wait timeout: %v", err)
		}
	}
	if err := tx3.rollback(); err != nil {
		t.Fatal(err)
	}

	// A waiter with time goes ahead when the holder commits.
	tx4 := b.begin(t, ctx)
	ch := lockTxAsync(ctx, s, tx4, name)
	ltxAwaitWaiting(t, ctx, b, tx4)
	ltxNotYet(t, ch, "LockTx returned")
	if err := tx1.commit(); err != nil {
		t.Fatal(err)
	}
	r := ltxReceive(t, ctx, b, ch)
	if r.err != nil {
		t.Fatalf("LockTx after the holder committed: %v", r.err)
	}
	if r.token <= tok1 {
		t.Fatalf("token %d after the holder's %d", r.token, tok1)
	}
	if err := tx4.commit(); err != nil {
		t.Fatal(err)
	}
}

// testLockTxEndsWithRollback: the holder's rollback lets a waiter in.
func testLockTxEndsWithRollback(t *testing.T, b *ltxBackend) {
	ctx, s, name := ltxCtx(t), b.newStore(t), t.Name()
	tx1 := b.begin(t, ctx)
	tok1 := mustLockTx(t, ctx, s, tx1, name)
	tx2 := b.begin(t, ctx)
	ch := lockTxAsync(ctx, s, tx2, name)
	ltxAwaitWaiting(t, ctx, b, tx2)
	ltxNotYet(t, ch, "LockTx returned")
	if err := tx1.rollback(); err != nil {
		t.Fatal(err)
	}
	r := ltxReceive(t, ctx, b, ch)
	if r.err != nil {
		t.Fatalf("LockTx after the holder rolled back: %v", r.err)
	}
	if r.token <= tok1 { // from the clock: the rolled back token was not kept
		t.Fatalf("token %d after the rolled back %d", r.token, tok1)
	}
	if err := tx2.commit(); err != nil {
		t.Fatal(err)
	}
}

// testLockTxEndsWithKill: the holder's connection killed by the server,
// its transaction rolls back with its fenced write, and a waiter goes
// ahead.
func testLockTxEndsWithKill(t *testing.T, b *ltxBackend) {
	ctx, s, name := ltxCtx(t), b.newStore(t), t.Name()
	tx1 := b.begin(t, ctx)
	tok1 := mustLockTx(t, ctx, s, tx1, name)
	if err := tx1.exec(ctx, `INSERT INTO locktx_fenced (name, token) VALUES (?, ?)`, name, int64(tok1)); err != nil {
		t.Fatal(err)
	}
	tx2 := b.begin(t, ctx)
	ch := lockTxAsync(ctx, s, tx2, name)
	ltxAwaitWaiting(t, ctx, b, tx2)
	ltxNotYet(t, ch, "LockTx returned")
	if err := b.kill(ctx, tx1.id); err != nil {
		t.Fatal(err)
	}
	r := ltxReceive(t, ctx, b, ch)
	if r.err != nil {
		t.Fatalf("LockTx after the holder was killed: %v", r.err)
	}
	if r.token <= tok1 {
		t.Fatalf("token %d after the killed holder's %d", r.token, tok1)
	}
	var n int64
	if err := tx2.scan(ctx, `SELECT COUNT(*) FROM locktx_fenced WHERE name = ?`, []any{name}, &n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatal("the killed holder's write is there")
	}
	if err := tx1.commit(); err == nil {
		t.Fatal("the killed holder's commit succeeded")
	}
	if err := tx2.commit(); err != nil {
		t.Fatal(err)
	}
}

// testLockTxTokens: tokens strictly increase across LockTx and the lease
// locks of the name, both ways, and past a rolled back LockTx.
func testLockTxTokens(t *testing.T, b *ltxBackend) {
	ctx, s, name := ltxCtx(t), b.newStore(t), t.Name()
	c := distlock.New(s)
	t.Cleanup(func() { c.Close() })
	var last uint64
	next := func(what string, tok uint64) {
		t.Helper()
		if tok <= last {
			t.Fatalf("%s: token %d, not above %d", what, tok, last)
		}
		last = tok
	}
	lockTx := func(commit bool) uint64 {
		t.Helper()
		x := b.begin(t, ctx)
		tok := mustLockTx(t, ctx, s, x, name)
		end := x.rollback
		if commit {
			end = x.commit
		}
		if err := end(); err != nil {
			t.Fatal(err)
		}
		return tok
	}
	lease := func(m *distlock.Mutex) uint64 {
		t.Helper()
		l, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		return l.Token()
	}
	next("LockTx", lockTx(true))
	next("Mutex after LockTx", lease(c.Mutex(name)))
	next("LockTx after Mutex", lockTx(true))
	next("LockTx rolled back", lockTx(false))
	next("LockTx after a rollback", lockTx(true)) // by the clock
	next("FairMutex after LockTx", lease(c.FairMutex(name)))

	x := b.begin(t, ctx)
	next("LockTx after FairMutex", mustLockTx(t, ctx, s, x, name))
	next("LockTx again in the same transaction", mustLockTx(t, ctx, s, x, name))
	if err := x.commit(); err != nil {
		t.Fatal(err)
	}
	next("Mutex after two LockTx", lease(c.Mutex(name)))

	info, err := c.Mutex(name).Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.LastToken != last {
		t.Fatalf("last token %d, want %d", info.LastToken, last)
	}
}

// testLockTxLeaseHeld: LockTx on a name held by a lease returns
// ErrNotAcquired at once; the transaction is still usable, and its
// rollback releases whatever it locked.
func testLockTxLeaseHeld(t *testing.T, b *ltxBackend) {
	ctx, s, name := ltxCtx(t), b.newStore(t), t.Name()
	c := distlock.New(s)
	t.Cleanup(func() { c.Close() })
	l, err := c.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	x := b.begin(t, ctx)
	start := time.Now()
	_, err = s.LockTx(ctx, x.tx, name)
	took := time.Since(start)
	t.Logf("refused in %v: %v", took, err)
	if !errors.Is(err, store.ErrNotAcquired) || !errors.Is(err, distlock.ErrNotAcquired) || errors.Is(err, store.ErrBackend) {
		t.Fatalf("LockTx of a name held by a lease: %v, want ErrNotAcquired", err)
	}
	if !strings.Contains(err.Error(), "mutex lease until") {
		t.Errorf("the refusal does not say until when the lease lasts: %v", err)
	}
	if took > 5*time.Second {
		t.Errorf("refused after %v: it waited", took)
	}
	var one int64
	if err := x.scan(ctx, `SELECT 1`, nil, &one); err != nil || one != 1 {
		t.Fatalf("the transaction after the refusal: %v", err)
	}
	unlocked := make(chan error, 1)
	go func() { unlocked <- l.Unlock(ctx) }() // waits for the rollback, if x locked the row
	if err := x.rollback(); err != nil {
		t.Fatal(err)
	}
	if err := ltxReceive(t, ctx, b, unlocked); err != nil {
		t.Fatalf("Unlock after the rollback: %v", err)
	}
	x = b.begin(t, ctx)
	if tok := mustLockTx(t, ctx, s, x, name); tok <= l.Token() {
		t.Fatalf("token %d after the lease's %d", tok, l.Token())
	}
	if err := x.commit(); err != nil {
		t.Fatal(err)
	}
}

type leaseResult struct {
	l   *distlock.Lease
	err error
}

// lockAsync runs m.Lock in a goroutine; its result comes on the channel.
func lockAsync(ctx context.Context, m *distlock.Mutex) <-chan leaseResult {
	ch := make(chan leaseResult, 1)
	go func() {
		l, err := m.Lock(ctx)
		ch <- leaseResult{l, err}
	}()
	return ch
}

// testLockTxLeaseWaits: a lease acquisition waits while a LockTx holds the
// row, and gets the lock when its transaction commits.
func testLockTxLeaseWaits(t *testing.T, b *ltxBackend) {
	ctx, s, name := ltxCtx(t), b.newStore(t), t.Name()
	c := distlock.New(s)
	t.Cleanup(func() { c.Close() })
	x := b.begin(t, ctx)
	tok := mustLockTx(t, ctx, s, x, name)
	leased := lockAsync(ctx, c.Mutex(name))
	b.await(t, "Mutex.Lock waits for the row lock", func() (bool, error) {
		n, err := b.blockedBy(ctx, x.id)
		return n >= 1, err
	})
	ltxNotYet(t, leased, "Mutex.Lock returned")
	if err := x.commit(); err != nil {
		t.Fatal(err)
	}
	lr := ltxReceive(t, ctx, b, leased)
	if lr.err != nil {
		t.Fatalf("Mutex.Lock after the LockTx committed: %v", lr.err)
	}
	if lr.l.Token() <= tok {
		t.Fatalf("lease token %d after LockTx's %d", lr.l.Token(), tok)
	}
	if err := lr.l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// testLockTxQueuedWithLease: a LockTx and a lease acquisition both wait
// for a LockTx's row. When it commits, one of them gets the row first:
// the lease, and the LockTx is then refused (the lease holds the name);
// or the LockTx, and the lease acquisition waits on until it commits.
// MariaDB grants row locks in the order asked (the lease first);
// PostgreSQL does not promise an order behind a row that was updated.
func testLockTxQueuedWithLease(t *testing.T, b *ltxBackend) {
	ctx, s, name := ltxCtx(t), b.newStore(t), t.Name()
	c := distlock.New(s)
	t.Cleanup(func() { c.Close() })
	txA := b.begin(t, ctx)
	tokA := mustLockTx(t, ctx, s, txA, name)
	leased := lockAsync(ctx, c.Mutex(name))
	b.await(t, "Mutex.Lock waits for the row lock", func() (bool, error) {
		n, err := b.blockedBy(ctx, txA.id)
		return n >= 1, err
	})
	txB := b.begin(t, ctx)
	ch := lockTxAsync(ctx, s, txB, name)
	ltxAwaitWaiting(t, ctx, b, txB)
	ltxNotYet(t, leased, "Mutex.Lock returned")
	ltxNotYet(t, ch, "LockTx returned")
	if err := txA.commit(); err != nil {
		t.Fatal(err)
	}
	r := ltxReceive(t, ctx, b, ch)
	var lr leaseResult
	switch {
	case r.err == nil:
		t.Logf("the LockTx got the row before the lease acquisition")
		if r.token <= tokA {
			t.Fatalf("token %d after %d", r.token, tokA)
		}
		ltxNotYet(t, leased, "Mutex.Lock returned")
		if err := txB.commit(); err != nil {
			t.Fatal(err)
		}
		if lr = ltxReceive(t, ctx, b, leased); lr.err == nil && lr.l.Token() <= r.token {
			t.Fatalf("lease token %d after LockTx's %d", lr.l.Token(), r.token)
		}
	case errors.Is(r.err, store.ErrNotAcquired):
		t.Logf("the lease acquisition got the row first; LockTx: %v", r.err)
		var one int64
		if err := txB.scan(ctx, `SELECT 1`, nil, &one); err != nil {
			t.Fatalf("the transaction after the refusal: %v", err)
		}
		if err := txB.rollback(); err != nil {
			t.Fatal(err)
		}
		if lr = ltxReceive(t, ctx, b, leased); lr.err == nil && lr.l.Token() <= tokA {
			t.Fatalf("lease token %d after LockTx's %d", lr.l.Token(), tokA)
		}
	default:
		t.Fatalf("LockTx behind a LockTx and a lease acquisition: %v", r.err)
	}
	if lr.err != nil {
		t.Fatalf("Mutex.Lock: %v", lr.err)
	}
	if err := lr.l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// testLockTxFirstUseConcurrent: in each round, goroutines begin a
// transaction each, at the server's default isolation (REPEATABLE READ on
// MariaDB), then take a brand-new name all at once, and increment a
// counter with a plain read and a write: no deadlock, no lost update,
// and tokens in commit order.
func testLockTxFirstUseConcurrent(t *testing.T, b *ltxBackend) {
	const workers, rounds = 16, 20
	ctx, s, counter := ltxCtx(t), b.newStore(t), t.Name()
	if err := b.admin.exec(ctx, `INSERT INTO locktx_counter (name, n, token) VALUES (?, 0, 0)`, counter); err != nil {
		t.Fatal(err)
	}
	// The store makes its tables at its first use, with a connection of
	// its own: not while the pool's connections are all in transactions.
	if _, err := s.Inspect(ctx, "warm-up"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for round := range rounds {
		name := fmt.Sprintf("%s/%d", t.Name(), round)
		if err := b.admin.exec(ctx, `UPDATE locktx_counter SET token = 0 WHERE name = ?`, counter); err != nil {
			t.Fatal(err)
		}
		var begun, done sync.WaitGroup
		ready := make(chan struct{})
		errs := make(chan error, workers)
		for range workers {
			begun.Add(1)
			done.Go(func() {
				x, err := b.start(ctx, sql.LevelDefault)
				begun.Done()
				if err != nil {
					errs <- err
					return
				}
				defer x.rollback() // after the commit: does nothing
				<-ready
				errs <- incrementUnderLockTx(ctx, s, x, name, counter)
			})
		}
		begun.Wait()
		close(ready)
		done.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
	var n int64
	if err := b.admin.scan(ctx, `SELECT n FROM locktx_counter WHERE name = ?`, []any{counter}, &n); err != nil {
		t.Fatal(err)
	}
	if n != workers*rounds {
		t.Fatalf("counter %d, want %d", n, workers*rounds)
	}
	t.Logf("%d transactions, %d at once, in %v", workers*rounds, workers, time.Since(start))
}

// incrementUnderLockTx takes the lock name in x, then increments the
// counter with a plain read and a write, and commits.
func incrementUnderLockTx(ctx context.Context, s *sqlstore.Store, x *ltxTx, name, counter string) error {
	tok, err := s.LockTx(ctx, x.tx, name)
	if err != nil {
		return err
	}
	var n, last int64
	if err := x.scan(ctx, `SELECT n, token FROM locktx_counter WHERE name = ?`, []any{counter}, &n, &last); err != nil {
		return err
	}
	if int64(tok) <= last {
		return fmt.Errorf("token %d, not above the last writer's %d", tok, last)
	}
	if err := x.exec(ctx, `UPDATE locktx_counter SET n = ?, token = ? WHERE name = ?`, n+1, int64(tok), counter); err != nil {
		return err
	}
	return x.commit()
}

// ltxFakePgxTx is a pgx.Tx that is not one of the store's database.
type ltxFakePgxTx struct{ pgx.Tx }

// testLockTxInvalid: transactions of the wrong type fail with
// ErrInvalidOption, and invalid names with ErrInvalidName, before
// anything is sent.
func testLockTxInvalid(t *testing.T, b *ltxBackend) {
	ctx, s := ltxCtx(t), b.newStore(t)
	x := b.begin(t, ctx)
	txs := []any{nil, 42, "tx", (*sql.Tx)(nil), &sql.DB{}, (*pgxpool.Tx)(nil), context.Background()}
	if !b.pg {
		txs = append(txs, ltxFakePgxTx{}, &pgxpool.Tx{})
	}
	for _, tx := range txs {
		_, err := s.LockTx(ctx, tx, "jobs")
		t.Logf("%T: %v", tx, err)
		if !errors.Is(err, store.ErrInvalidOption) {
			t.Errorf("LockTx with a %T: %v, want ErrInvalidOption", tx, err)
		}
	}
	for _, name := range []string{"", strings.Repeat("a", 513), "a{b", "a}", "a\nb", "a\x00", "\xff"} {
		_, err := s.LockTx(ctx, x.tx, name)
		if !errors.Is(err, store.ErrInvalidName) {
			t.Errorf("LockTx of %q: %v, want ErrInvalidName", name, err)
		}
	}
	_, err := s.LockTx(ctx, x.tx, "")
	t.Logf("empty name: %v", err)
	var one int64
	if err := x.scan(ctx, `SELECT 1`, nil, &one); err != nil {
		t.Fatalf("the transaction after refusals: %v", err)
	}
	for _, name := range []string{strings.Repeat("é", 256), "jobs/Ünïcode ✓", "Jobs"} {
		if _, err := s.LockTx(ctx, x.tx, name); err != nil {
			t.Errorf("LockTx of %q: %v", name, err)
		}
	}
	if err := x.commit(); err != nil {
		t.Fatal(err)
	}
	var bad *sqlstore.Store
	if _, err := bad.LockTx(ctx, x.tx, "jobs"); !errors.Is(err, store.ErrInvalidOption) {
		t.Errorf("LockTx of a nil store: %v", err)
	}
	if b.pg {
		_, err = sqlstore.NewPostgres(nil).LockTx(ctx, x.tx, "jobs")
	} else {
		_, err = sqlstore.NewMySQL(nil).LockTx(ctx, x.tx, "jobs")
	}
	if !errors.Is(err, store.ErrInvalidOption) {
		t.Errorf("LockTx of a store without a database: %v", err)
	}
}

// testLockTxRepeatableRead: at REPEATABLE READ, a LockTx that waited for
// another one's commit fails with a serialization failure on PostgreSQL,
// as documented, and succeeds on MariaDB.
func testLockTxRepeatableRead(t *testing.T, b *ltxBackend) {
	ctx, s, name := ltxCtx(t), b.newStore(t), t.Name()
	tx1 := b.begin(t, ctx)
	tok1 := mustLockTx(t, ctx, s, tx1, name)
	tx2 := b.beginAt(t, ctx, sql.LevelRepeatableRead)
	ch := lockTxAsync(ctx, s, tx2, name)
	ltxAwaitWaiting(t, ctx, b, tx2)
	if err := tx1.commit(); err != nil {
		t.Fatal(err)
	}
	r := ltxReceive(t, ctx, b, ch)
	if !b.pg {
		if r.err != nil || r.token <= tok1 {
			t.Fatalf("LockTx at REPEATABLE READ after a wait: token %d (after %d), %v", r.token, tok1, r.err)
		}
		if err := tx2.commit(); err != nil {
			t.Fatal(err)
		}
		return
	}
	var pe *pgconn.PgError
	if !errors.Is(r.err, store.ErrBackend) || !errors.As(r.err, &pe) || pe.Code != "40001" {
		t.Fatalf("LockTx at REPEATABLE READ after a wait: %v, want ErrBackend with SQLSTATE 40001", r.err)
	}
	t.Logf("as documented: %v", r.err)
}
