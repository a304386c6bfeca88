package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/distlock/distlock/store"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// LockTx takes the lock name inside tx, the caller's transaction, and
// returns a fencing token for it: the classic SELECT … FOR UPDATE lock on
// the lock's row. The lock is the row lock itself, and it ends with tx:
// its commit or rollback releases it, and nothing else does.
//
// tx is a pgx.Tx (github.com/jackc/pgx/v5) or a *sql.Tx (of
// github.com/jackc/pgx/v5/stdlib or another PostgreSQL driver) for a
// store made by NewPostgres, a *sql.Tx for a store made by NewMySQL, in
// either case on the store's database (the same pool or db, or one on the
// same database and table). An invalid name fails with an error wrapping
// store.ErrInvalidName (distlock.ErrInvalidName is the same value), and
// any other tx or a store with invalid settings with one wrapping
// store.ErrInvalidOption, before anything is sent.
//
// # When to use it
//
// Use LockTx for short critical sections on the same database as the
// lock, whose work is writes of tx itself: they are atomic with the lock
// (the next holder sees all of them or none), and they can be fenced by
// the token, which they can store and compare (WHERE last_token < $token).
// Use a lease lock of a Client (Client.Mutex, FairMutex and the others)
// for work outside the database, for long sections, to wait in line, or to
// hold a lock across transactions: it is renewed, and tells its holder
// when it is lost.
//
// LockTx holds a connection of the database, and the row lock, for the
// whole of tx: keep tx short. There is no lease and no renewal, and no
// lost-lock signal is needed: whatever happens to the client, the lock
// lasts exactly as long as tx. If the client dies or its connection
// breaks, the server rolls tx back, and its writes with the lock.
//
// # Waiting
//
// LockTx waits, as FOR UPDATE does, while another transaction holds the
// row: another LockTx, or a step of a lease lock in flight (a few
// milliseconds). The wait is bounded by ctx and by the database's lock
// wait timeout (PostgreSQL's lock_timeout, default none;
// innodb_lock_wait_timeout, default 50 s): either way LockTx returns an
// error wrapping store.ErrNotAcquired, with ctx's cause or the database's
// error. Prefer the database's timeout (SET LOCAL lock_timeout = '2s';
// SET SESSION innodb_lock_wait_timeout = 2): it ends only the statement
// (PostgreSQL then needs tx rolled back, MySQL lets it go on). A driver
// whose ctx ends during a statement closes the connection instead (pgx
// and go-sql-driver/mysql do): tx is over, and the server may keep the
// abandoned statement in line for the row until its turn comes.
//
// LockTx never waits for a lease holder: if the name is held by a lease
// lock (a Mutex, FairMutex, RWMutex, Semaphore or Election of a Client), or
// waited for in a queue of one, it returns at once an error wrapping
// store.ErrNotAcquired (distlock.ErrNotAcquired is the same value) that
// says until when the lease lasts. Waiting could only deadlock: while tx
// holds the row, the lease holder could not even release it. tx is still
// usable, but it may keep the row locked (LockTx read it FOR UPDATE),
// holding up the lease's renewals and release, until it ends: end it
// soon.
// Conversely, an acquisition of a lease lock on the name (Mutex.Lock, and
// TryLock too) waits while a LockTx holds the row: its statement waits on
// the row lock, and goes ahead when tx ends. The caller waits as long as
// its context lets it, the request itself no longer than the lease's
// length (then it fails with store.ErrBackend): keep transactions that
// call LockTx much shorter than the leases of the same names.
//
// # Tokens
//
// The token is above every token that the name's row kept before, from
// LockTx or from the lease locks, and no lower than the database clock in
// microseconds, read once the row is locked; the row keeps it if tx
// commits. A tx rolled back leaves its token unused and unrecorded: the
// next LockTx's token is still higher, as it comes from the clock, unless
// the database clock stepped back in between. (A step of a lease lock on
// MySQL reads the clock as its statement starts, before it waits for the
// row: its token is above the row's, but may be below that of a LockTx it
// waited for and that rolled back.) Calling LockTx again for the same
// name in the same tx returns a new token at once.
//
// # Isolation
//
// Run tx at READ COMMITTED on PostgreSQL (its default): under REPEATABLE
// READ or SERIALIZABLE, a LockTx that waited for another one fails with a
// serialization failure (SQLSTATE 40001, wrapped in store.ErrBackend),
// and tx must be retried. MySQL's and MariaDB's default, REPEATABLE READ,
// works: LockTx reads the row with locking reads only, and never locks a
// missing one (which would take a gap lock), so first uses of a name by
// many transactions at once do not deadlock. Make LockTx the first read
// of tx there, though, or make the reads it guards locking ones: a plain
// read made before it fixes tx's snapshot before the lock, so later plain
// reads would miss the previous holder's writes. Transactions that lock
// several names should take them in one order; a deadlock between them
// is the database's, and fails with its error (wrapped in
// store.ErrBackend): retry tx.
//
// # Connections
//
// On PostgreSQL, LockTx runs all its statements in tx: at the first use
// of a name, it creates the name's row in tx. On MySQL and MariaDB, it
// first reads the row, and makes it if it is missing, on a connection of
// the store's db outside any transaction (one round trip, which also
// refuses at once a name held by a lease): a db limited by
// SetMaxOpenConns needs a connection to spare beside the transactions that
// call LockTx. The first call of a store may also use a connection of its
// pool or db to create its tables (see WithoutMigration).
func (s *Store) LockTx(ctx context.Context, tx any, name string) (token uint64, err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("sqlstore: lock-tx %q: %w", name, err)
		}
	}()
	if s == nil {
		return 0, fmt.Errorf("%w: nil store", store.ErrInvalidOption)
	}
	if err := store.CheckName(name); err != nil {
		return 0, err
	}
	if s.err != nil {
		return 0, s.err
	}
	var d txDialect
	switch db := s.db.(type) {
	case *postgres:
		d = (*pgLockTx)(db)
	case *mysql:
		d = (*myLockTx)(db)
	default:
		return 0, fmt.Errorf("%w: LockTx on a %T store", store.ErrUnsupported, s.db)
	}
	c, err := d.conn(tx)
	if err != nil {
		return 0, err
	}
	if err := s.prepare(ctx); err != nil {
		return 0, lockTxErr(ctx, err)
	}
	r, now, err := d.lock(ctx, c, name)
	if err != nil {
		return 0, lockTxErr(ctx, err)
	}
	if err := leaseBusy(&r.state, now); err != nil {
		return 0, err
	}
	token = (&step{name: name, now: now, token: &r.token}).mint()
	if err := d.write(ctx, c, name, token); err != nil {
		return 0, lockTxErr(ctx, err)
	}
	return token, nil
}

// leaseBusy returns the refusal of a LockTx on a lock whose state, at
// the database's time now, has live lease holders or places in a queue;
// nil if it has none.
func leaseBusy(l *lockState, now int64) error {
	l.purge(now)
	switch {
	case len(l.Holders) > 0:
		until := time.UnixMicro(l.until()).UTC().Format("2006-01-02T15:04:05.000000Z")
		return fmt.Errorf("%w: held by a %s lease until %s (database clock)", store.ErrNotAcquired, l.Kind, until)
	case len(l.Queue) > 0:
		return fmt.Errorf("%w: %d waiting for a %s lease in its queue", store.ErrNotAcquired, len(l.Queue), l.Kind)
	}
	return nil
}

// lockTxErr classifies the failure of a statement of LockTx: the end of
// ctx and the database's lock wait timeout are contention
// (store.ErrNotAcquired), anything else a failure of the database
// (store.ErrBackend).
func lockTxErr(ctx context.Context, err error) error {
	var pe *pgconn.PgError
	switch {
	case errors.Is(err, store.ErrNotAcquired):
		return err
	case ctx.Err() != nil:
		return fmt.Errorf("%w: %w", store.ErrNotAcquired, context.Cause(ctx))
	case errors.As(err, &pe) && pe.Code == "55P03", // lock_not_available
		strings.Contains(err.Error(), "Error 1205"): // ER_LOCK_WAIT_TIMEOUT
		return fmt.Errorf("%w: the row lock was not granted in time: %w", store.ErrNotAcquired, err)
	}
	return backendErr(err)
}

// A txDialect is one database's LockTx.
type txDialect interface {
	// conn accepts the caller's transaction, or refuses it with
	// store.ErrInvalidOption.
	conn(tx any) (txConn, error)
	// lock locks the row of name in the transaction, making it if it is
	// missing without ever locking a missing row, and reads it and the
	// database's clock (µs) once it is locked. It may refuse at once a
	// lock held by a lease (store.ErrNotAcquired).
	lock(ctx context.Context, c txConn, name string) (*row, int64, error)
	// write stores token as the row's last token, in the transaction.
	write(ctx context.Context, c txConn, name string, token uint64) error
}

// A txConn runs statements in the caller's transaction, whatever its
// driver.
type txConn interface {
	queryRow(ctx context.Context, query string, args ...any) interface{ Scan(dest ...any) error }
	exec(ctx context.Context, query string, args ...any) (affected int64, err error)
}

type pgxConn struct{ tx pgx.Tx }

func (c pgxConn) queryRow(ctx context.Context, query string, args ...any) interface{ Scan(...any) error } {
	return c.tx.QueryRow(ctx, query, args...)
}

func (c pgxConn) exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := c.tx.Exec(ctx, query, args...)
	return tag.RowsAffected(), err
}

type sqlConn struct{ tx *sql.Tx }

func (c sqlConn) queryRow(ctx context.Context, query string, args ...any) interface{ Scan(...any) error } {
	return c.tx.QueryRowContext(ctx, query, args...)
}

func (c sqlConn) exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := c.tx.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// sqlTx returns tx as a *sql.Tx, or nil if it is not a non-nil one.
func sqlTx(tx any) *sql.Tx {
	t, _ := tx.(*sql.Tx)
	return t
}

// badTx refuses tx, which is not one of want.
func badTx(tx any, want string) error {
	if tx == nil || isNil(tx) {
		return fmt.Errorf("%w: nil transaction (want %s)", store.ErrInvalidOption, want)
	}
	return fmt.Errorf("%w: a transaction of type %T (want %s)", store.ErrInvalidOption, tx, want)
}

// isNil reports whether v is a nil pointer, map, slice, channel or
// function in a non-nil interface.
func isNil(v any) bool {
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Chan, reflect.Func, reflect.Interface:
		return rv.IsNil()
	}
	return false
}

// pgLockTx is LockTx on PostgreSQL.
type pgLockTx postgres

func (p *pgLockTx) conn(tx any) (txConn, error) {
	const want = "a pgx.Tx or a *sql.Tx on the store's PostgreSQL database"
	if t := sqlTx(tx); t != nil {
		return sqlConn{t}, nil
	}
	if t, ok := tx.(pgx.Tx); ok && !isNil(t) {
		return pgxConn{t}, nil
	}
	return nil, badTx(tx, want)
}

// lock locks the row FOR UPDATE in a subquery, so that the clock is read
// once the lock is granted (clock_timestamp() in the locking query itself
// would be read before a wait). PostgreSQL takes no gap locks: a missing
// row is made in the transaction (INSERT … ON CONFLICT DO NOTHING, which
// waits for a transaction making the same row), then locked.
func (p *pgLockTx) lock(ctx context.Context, c txConn, name string) (*row, int64, error) {
	query := `SELECT l.token, l.state, ` + pgClock + ` FROM (SELECT token, state FROM ` + p.table +
		` WHERE name = $1 FOR UPDATE) l`
	for attempt := 0; ; attempt++ {
		var token, now int64
		var state string
		err := c.queryRow(ctx, query, name).Scan(&token, &state, &now)
		if errors.Is(err, sql.ErrNoRows) && attempt == 0 {
			if _, err := c.exec(ctx, `INSERT INTO `+p.table+` (name) VALUES ($1) ON CONFLICT DO NOTHING`, name); err != nil {
				return nil, 0, err
			}
			continue
		}
		if errors.Is(err, sql.ErrNoRows) {
			return nil, 0, errors.New("the lock's row could not be made")
		}
		if err != nil {
			return nil, 0, err
		}
		r := &row{name: name, token: uint64(token), read: uint64(token)}
		if err := decodeState(r, state); err != nil {
			return nil, 0, err
		}
		return r, now, nil
	}
}

func (p *pgLockTx) write(ctx context.Context, c txConn, name string, token uint64) error {
	n, err := c.exec(ctx, `UPDATE `+p.table+` SET token = $1, rev = rev + 1 WHERE name = $2`, int64(token), name)
	if err == nil && n != 1 {
		err = fmt.Errorf("the lock's row was not updated (%d rows)", n)
	}
	return err
}

// myLockTx is LockTx on MySQL and MariaDB.
type myLockTx mysql

func (m *myLockTx) conn(tx any) (txConn, error) {
	if t := sqlTx(tx); t != nil {
		return sqlConn{t}, nil
	}
	return nil, badTx(tx, "a *sql.Tx on the store's MySQL database")
}

// lock makes sure the row exists first, on the store's db outside any
// transaction: a locking read of a missing row would take a gap lock at
// REPEATABLE READ, and two transactions holding one then deadlock when
// they insert the row. The row is read without locking (an INSERT IGNORE
// of an existing row would wait for its row lock), and a lock held by a
// lease is refused right there, without touching tx. Then tx locks the
// row (a record lock: unique key, existing row), and reads the clock in
// a statement of its own (UTC_TIMESTAMP is the time a statement starts,
// before its wait). The statements carry literals, as the steps' do (see
// binary).
func (m *myLockTx) lock(ctx context.Context, c txConn, name string) (*row, int64, error) {
	where := ` FROM ` + m.table + ` WHERE name = ` + binary(name)
	var state string
	var now int64
	err := m.db.QueryRowContext(ctx, `SELECT state, `+myClock+where).Scan(&state, &now)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if err := (*mysql)(m).create(ctx, []string{name}); err != nil {
			return nil, 0, err
		}
	case err != nil:
		return nil, 0, err
	default:
		r := &row{name: name}
		if err := decodeState(r, state); err != nil {
			return nil, 0, err
		}
		if err := leaseBusy(&r.state, now); err != nil {
			return nil, 0, err
		}
	}
	r := &row{name: name}
	err = c.queryRow(ctx, `SELECT token, state`+where+` FOR UPDATE`).Scan(&r.token, &state)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, 0, errors.New("the lock's row is gone (its rows must not be deleted)")
	}
	if err != nil {
		return nil, 0, err
	}
	r.read = r.token
	if err := decodeState(r, state); err != nil {
		return nil, 0, err
	}
	if err := c.queryRow(ctx, `SELECT `+myClock).Scan(&now); err != nil {
		return nil, 0, err
	}
	return r, now, nil
}

func (m *myLockTx) write(ctx context.Context, c txConn, name string, token uint64) error {
	n, err := c.exec(ctx, `UPDATE `+m.table+` SET token = `+strconv.FormatUint(token, 10)+
		`, rev = rev + 1 WHERE name = `+binary(name))
	if err == nil && n != 1 {
		err = fmt.Errorf("the lock's row was not updated (%d rows)", n)
	}
	return err
}
