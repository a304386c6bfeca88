package sqlstore

import (
	"context"
	"database/sql"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/distlock/distlock/store"
)

//go:embed schema/mysql.sql
var mysqlSchema string

// NewMySQL returns a store on a MariaDB (10.6 or later) or MySQL (8.0 or
// later) database, through db, opened with a driver such as
// github.com/go-sql-driver/mysql (no DSN parameter is needed: the store
// reads and writes times as integers, whatever parseTime and loc say). It
// does not contact the database until it is used, and never closes db. A
// nil db or an invalid option makes every operation of a Client on the
// store fail with store.ErrInvalidOption.
//
// Each step reads its row and writes it back with a compare-and-swap, each
// a statement on its own (no transaction stays open across round trips).
// MySQL has no notifications: waiters of other
// processes learn of releases and grants by polling (WithPollInterval).
func NewMySQL(db *sql.DB, opts ...Option) *Store {
	cfg := newConfig(opts)
	if db == nil && cfg.err == nil {
		cfg.err = fmt.Errorf("%w: nil MySQL database", store.ErrInvalidOption)
	}
	return newStore(&mysql{db: db, table: cfg.table}, cfg)
}

// MySQLSchema returns the SQL that creates the store's tables on MariaDB
// and MySQL, with the table name that opts give (WithTable).
func MySQLSchema(opts ...Option) (string, error) {
	return schema(mysqlSchema, newConfig(opts))
}

type mysql struct {
	db    *sql.DB
	table string
}

// myClock reads the database's clock in µs, whatever the session's time
// zone.
const myClock = `TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))`

func (m *mysql) migrate(ctx context.Context) error {
	where, args := `table_schema = DATABASE()`, []any{}
	db, base, qualified := strings.Cut(m.table, ".")
	if qualified {
		where, args = `table_schema = ?`, append(args, db)
	} else {
		base = m.table
	}
	var n int
	err := m.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.tables WHERE `+where+` AND table_name IN (?, ?)`,
		append(args, base, base+"_once")...).Scan(&n)
	if err != nil || n == 2 {
		return err
	}
	c, err := m.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	var got sql.NullInt64
	if err := c.QueryRowContext(ctx, `SELECT GET_LOCK(?, 30)`, "distlock schema "+m.table).Scan(&got); err != nil {
		return err
	}
	if got.Int64 != 1 {
		return errors.New("the schema lock was not granted within 30 s")
	}
	defer c.ExecContext(context.WithoutCancel(ctx), `SELECT RELEASE_LOCK(?)`, "distlock schema "+m.table)
	text, _ := schema(mysqlSchema, config{table: m.table})
	for _, stmt := range statements(text) {
		if _, err := c.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	return nil
}

// statements splits a schema file into its statements, without comments.
func statements(file string) []string {
	var b strings.Builder
	for _, line := range strings.Split(file, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			b.WriteString(line + "\n")
		}
	}
	var out []string
	for _, s := range strings.Split(b.String(), ";") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// begin implements dialect. A step on MySQL holds no transaction open
// across round trips: it reads its row (plainly: InnoDB's consistent read
// waits for no lock), and writes it back with a compare-and-swap on the
// row's rev, a single statement that commits on its own; if the row
// changed in between, nothing was written, and the step starts again. So a
// client that goes silent mid-step (a partition, a frozen process) holds
// no row locked behind it: MySQL has no timeout for a transaction left
// idle (MariaDB's idle_transaction_timeout is per session, and the
// sessions are the caller's), and TCP keepalive would take hours. A step
// writes one row: MultiMutex takes its members one after another
// (store.AcquireEach), and renewals are a step per lock.
func (m *mysql) begin(context.Context) (transaction, error) {
	return &myStep{m: m, revs: map[string]uint64{}}, nil
}

// singleRow implements oneRowSteps.
func (m *mysql) singleRow() bool { return true }

// conn takes a connection of the pool: failing, nothing was sent.
func (m *mysql) conn(ctx context.Context) (*sql.Conn, error) {
	c, err := m.db.Conn(ctx)
	if err != nil {
		return nil, unsent(err)
	}
	return c, nil
}

// A myStep is a step's view of its row: the rev it read.
type myStep struct {
	m    *mysql
	revs map[string]uint64
}

// The statements of the steps carry their values as literals, not
// parameters: with parameters, go-sql-driver prepares, executes and closes
// each statement (two round trips, not one) unless the DSN says
// interpolateParams=true. Names and texts are hexadecimal literals, which
// need no escaping; numbers are formatted.

// binary is b as a hexadecimal literal.
func binary(b string) string { return "X'" + hex.EncodeToString([]byte(b)) + "'" }

// text is s as a utf8mb4 string.
func text(s string) string { return "CONVERT(" + binary(s) + " USING utf8mb4)" }

// in returns "(X'…', X'…')" for names.
func in(names []string) string {
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = binary(n)
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

func (t *myStep) lock(ctx context.Context, names []string) ([]*row, int64, error) {
	q, err := t.m.db.QueryContext(ctx, `SELECT name, token, rev, state, `+myClock+` FROM `+t.m.table+` WHERE name IN `+in(names))
	if err != nil {
		return nil, 0, err
	}
	rows, now, err := scanSQLRows(q, true)
	for _, r := range rows {
		t.revs[r.name] = r.rev
	}
	return rows, now, err
}

// scanSQLRows reads rows of name, token, rev, state, and with clock the
// database's clock too.
func scanSQLRows(q *sql.Rows, clock bool) ([]*row, int64, error) {
	defer q.Close()
	var out []*row
	var now int64
	for q.Next() {
		var r row
		var name []byte
		var state string
		dest := []any{&name, &r.token, &r.rev, &state}
		if clock {
			dest = append(dest, &now)
		}
		if err := q.Scan(dest...); err != nil {
			return nil, 0, err
		}
		r.name, r.read = string(name), r.token
		if err := decodeState(&r, state); err != nil {
			return nil, 0, err
		}
		out = append(out, &r)
	}
	return out, now, q.Err()
}

// commit writes the step's row if the step changed it, by a
// compare-and-swap on its rev: errConflict (nothing written) if another
// step wrote it since it was read.
func (t *myStep) commit(ctx context.Context, rows []*row, _ []notice, _ bool) error {
	var dirty []*row
	for _, r := range rows {
		if r.dirty() {
			dirty = append(dirty, r)
		}
	}
	switch len(dirty) {
	case 0:
		return nil
	case 1:
	default:
		return unsent(errors.New("a MySQL step writes one row")) // never: see begin
	}
	r := dirty[0]
	w := r.encode()
	owner, expires := "NULL", "NULL"
	if w.owner != nil {
		owner = text(*w.owner)
		expires = "TIMESTAMPADD(MICROSECOND, " + strconv.FormatInt(w.expires.UnixMicro(), 10) + ", '1970-01-01 00:00:00')"
	}
	c, err := t.m.conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	res, err := c.ExecContext(ctx, `UPDATE `+t.m.table+` SET kind = `+text(w.kind)+`, owner_id = `+owner+
		`, expires_at = `+expires+`, token = `+strconv.FormatUint(r.token, 10)+`, rev = rev + 1, state = `+text(w.state)+
		` WHERE name = `+binary(r.name)+` AND rev = `+strconv.FormatUint(t.revs[r.name], 10))
	if err != nil && t.m.retryable(err) {
		return errConflict // a deadlock or a lock wait timed out: rolled back
	}
	if err != nil {
		return myErr(err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		if err == nil {
			err = errConflict
		}
		return err
	}
	return nil
}

func (t *myStep) rollback() {}

// saveOnce writes the record in one statement that selects the lock's
// row as the step read it (its rev): if the row changed since, nothing is
// written, and the step starts again (errConflict).
func (t *myStep) saveOnce(ctx context.Context, name string, rec store.Record, keep time.Duration) error {
	rev := strconv.FormatUint(t.revs[name], 10)
	res, err := t.m.db.ExecContext(ctx, `INSERT INTO `+t.m.table+`_once (name, period, token, at, pid, host, err, keep_until)
		SELECT name, `+strconv.FormatUint(rec.Period, 10)+`, `+strconv.FormatUint(rec.Token, 10)+`,
			TIMESTAMPADD(MICROSECOND, `+strconv.FormatInt(rec.At.UnixMicro(), 10)+`, '1970-01-01 00:00:00'),
			`+strconv.Itoa(rec.PID)+`, `+text(rec.Host)+`, `+text(rec.Err)+`,
			TIMESTAMPADD(MICROSECOND, `+strconv.FormatInt(keep.Microseconds(), 10)+`, UTC_TIMESTAMP(6))
		FROM `+t.m.table+` WHERE name = `+binary(name)+` AND rev = `+rev+`
		ON DUPLICATE KEY UPDATE period = VALUES(period), token = VALUES(token), at = VALUES(at), pid = VALUES(pid),
			host = VALUES(host), err = VALUES(err), keep_until = VALUES(keep_until)`)
	if err != nil {
		return myErr(err)
	}
	if n, err := res.RowsAffected(); err != nil || n > 0 {
		return err
	}
	// Nothing written: the lock's row changed, or the record was there
	// already, the same (a repeated step).
	var now uint64
	if err := t.m.db.QueryRowContext(ctx, `SELECT rev FROM `+t.m.table+` WHERE name = `+binary(name)).Scan(&now); err != nil {
		return err
	}
	if now != t.revs[name] {
		return errConflict
	}
	return nil
}

// myErr marks the failure of a statement that certainly did not apply:
// the server refused it (the driver's message of a server error starts
// with "Error <number>"; its type is not imported), but for the errors of
// a statement cut short (a killed query or connection, a shutdown), which
// may have applied.
func myErr(err error) error {
	s := err.Error()
	for _, cut := range []string{"Error 1927", "Error 1053", "Error 1317", "Error 2013"} {
		if strings.HasPrefix(s, cut) {
			return err
		}
	}
	if strings.HasPrefix(s, "Error ") {
		return unsent(err)
	}
	return err
}

func (m *mysql) create(ctx context.Context, names []string) error {
	for _, n := range names {
		if _, err := m.db.ExecContext(ctx, `INSERT IGNORE INTO `+m.table+` (name, state) VALUES (`+binary(n)+`, '{}')`); err != nil {
			return err
		}
	}
	return nil
}

func (m *mysql) read(ctx context.Context, names []string) ([]*row, int64, error) {
	var now int64
	if err := m.db.QueryRowContext(ctx, `SELECT `+myClock).Scan(&now); err != nil {
		return nil, 0, err
	}
	q, err := m.db.QueryContext(ctx, `SELECT name, token, rev, state FROM `+m.table+` WHERE name IN `+in(names))
	if err != nil {
		return nil, 0, err
	}
	rows, _, err := scanSQLRows(q, false)
	return rows, now, err
}

func (m *mysql) held(ctx context.Context) ([]string, error) {
	q, err := m.db.QueryContext(ctx, `SELECT name FROM `+m.table+` WHERE expires_at > UTC_TIMESTAMP(6)`)
	if err != nil {
		return nil, err
	}
	defer q.Close()
	var out []string
	for q.Next() {
		var n []byte
		if err := q.Scan(&n); err != nil {
			return nil, err
		}
		out = append(out, string(n))
	}
	return out, q.Err()
}

// retryable: ER_LOCK_DEADLOCK (1213) and ER_LOCK_WAIT_TIMEOUT (1205). The
// driver's error type is not imported (the caller picks the driver): its
// message starts with "Error <number>".
func (m *mysql) retryable(err error) bool {
	s := err.Error()
	return strings.Contains(s, "Error 1213") || strings.Contains(s, "Error 1205")
}

// missingTable: ER_NO_SUCH_TABLE.
func (m *mysql) missingTable(err error) bool { return strings.Contains(err.Error(), "Error 1146") }

// readOnly: ER_OPTION_PREVENTS_STATEMENT (--read-only, the message naming
// it) or ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION.
func (m *mysql) readOnly(err error) bool {
	s := err.Error()
	return strings.Contains(s, "Error 1792") || strings.Contains(s, "Error 1290") && strings.Contains(s, "read-only")
}

func (m *mysql) onceRead(ctx context.Context, name string) (int64, store.Record, bool, error) {
	var now int64
	var period, token, at sql.NullInt64
	var pid sql.NullInt64
	var host, text sql.NullString
	err := m.db.QueryRowContext(ctx, `SELECT `+myClock+`, o.period, o.token,
			TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', o.at), o.pid, o.host, o.err
		FROM (SELECT 1 AS one) AS one LEFT JOIN `+m.table+`_once o ON o.name = ? AND o.keep_until > UTC_TIMESTAMP(6)`,
		[]byte(name)).Scan(&now, &period, &token, &at, &pid, &host, &text)
	if err != nil || !period.Valid {
		return now, store.Record{}, false, err
	}
	return now, store.Record{Period: uint64(period.Int64), Token: uint64(token.Int64), At: time.UnixMicro(at.Int64),
		PID: int(pid.Int64), Host: host.String, Err: text.String}, true, nil
}

func (m *mysql) onceForget(ctx context.Context, name string) (bool, error) {
	res, err := m.db.ExecContext(ctx, `DELETE FROM `+m.table+`_once WHERE name = ? AND keep_until > UTC_TIMESTAMP(6)`, []byte(name))
	if err != nil {
		return false, err
	}
	n, _ := res.RowsAffected()
	_, err = m.db.ExecContext(ctx, `DELETE FROM `+m.table+`_once WHERE name = ?`, []byte(name))
	return n > 0, err
}

// takeFree implements fastPath: one statement, whose token comes back in
// the reply as LAST_INSERT_ID. The state is assigned before the token,
// so that both read the row's old token whether the server assigns left
// to right (MySQL, MariaDB by default) or all at once (MariaDB's
// SIMULTANEOUS_ASSIGNMENT).
func (m *mysql) takeFree(ctx context.Context, r store.Request, f freeTake) (uint64, bool, error) {
	next := `GREATEST(token + 1, ` + myClock + `)`
	until := `(` + myClock + ` + ` + strconv.FormatInt(f.lease, 10) + `)`
	c, err := m.conn(ctx)
	if err != nil {
		return 0, false, err
	}
	defer c.Close()
	res, err := c.ExecContext(ctx, `UPDATE `+m.table+` SET
		state = CONCAT(`+text(f.beforeToken)+`, `+next+`, `+text(f.beforeUntil)+`, `+until+`, `+
		text(f.beforeSince)+`, `+myClock+` DIV 1000, `+text(f.end)+`),
		token = LAST_INSERT_ID(`+next+`), kind = 'mutex', owner_id = `+text(store.OwnerID(r.Owner))+`,
		expires_at = TIMESTAMPADD(MICROSECOND, `+until+`, '1970-01-01 00:00:00'), rev = rev + 1
		WHERE name = `+binary(r.Name)+` AND state = '{}'`)
	if err != nil {
		return 0, false, myErr(err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return 0, false, err
	}
	token, err := res.LastInsertId()
	return uint64(token), err == nil, err
}

// releaseOnly implements fastPath. It commits as the server does: MySQL
// has no per-transaction durability to relax. It frees nothing whose
// release is to be told (MySQL has no notices to send; the general path
// frees it).
func (m *mysql) releaseOnly(ctx context.Context, r store.Request, _ notice) (bool, error) {
	holds := ``
	if r.Hold != 0 {
		holds = ` AND JSON_LENGTH(state, '$.holders[0].holds') = 1
			AND JSON_EXTRACT(state, '$.holders[0].holds[0].id') = ` + strconv.FormatUint(r.Hold, 10)
	}
	c, err := m.conn(ctx)
	if err != nil {
		return false, err
	}
	defer c.Close()
	res, err := c.ExecContext(ctx, `UPDATE `+m.table+` SET kind = '', owner_id = NULL, expires_at = NULL,
		rev = rev + 1, state = '{}'
		WHERE name = `+binary(r.Name)+` AND kind = 'mutex' AND JSON_LENGTH(state) = 2
			AND JSON_LENGTH(state, '$.holders') = 1
			AND JSON_UNQUOTE(JSON_EXTRACT(state, '$.holders[0].owner')) = `+text(r.Owner)+holds+`
			AND CAST(JSON_EXTRACT(state, '$.holders[0].until') AS SIGNED) > `+myClock)
	if err != nil {
		return false, myErr(err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}
