//go:build linux

package sqltest

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

func TestMariaDBWriteRead(t *testing.T) {
	m := StartMariaDB(t)
	if m.Port() == 0 || m.Port() == 3306 {
		t.Errorf("Port() = %d, want a free port", m.Port())
	}
	if got, want := m.DSN(), fmt.Sprintf("root@tcp(127.0.0.1:%d)/test?parseTime=true", m.Port()); got != want {
		t.Errorf("DSN() = %q, want %q", got, want)
	}
	if got, want := m.URL(), fmt.Sprintf("mysql://root@127.0.0.1:%d/test", m.Port()); got != want {
		t.Errorf("URL() = %q, want %q", got, want)
	}
	if got, want := m.Addr(), "127.0.0.1:"+strconv.Itoa(m.Port()); got != want {
		t.Errorf("Addr() = %q, want %q", got, want)
	}
	for name, path := range map[string]string{"LogPath": m.LogPath(), "Socket": m.Socket()} {
		if !strings.HasPrefix(path, m.Dir()+string(os.PathSeparator)) {
			t.Errorf("%s() = %q, not in Dir() = %q", name, path, m.Dir())
		}
	}
	db := mdbOpen(t, m)
	c := ctx(t, queryTimeout)

	var dbName, user, charset, bind string
	var flush, maxConn int
	err := db.QueryRowContext(c, `SELECT DATABASE(), CURRENT_USER(), @@character_set_database,
		@@bind_address, @@innodb_flush_log_at_trx_commit, @@max_connections`).Scan(&dbName, &user, &charset, &bind, &flush, &maxConn)
	if err != nil {
		t.Fatal(err)
	}
	if dbName != Database || user != "root@127.0.0.1" || charset != "utf8mb4" || bind != "127.0.0.1" || flush != 2 || maxConn != 100 {
		t.Errorf("database %q user %q charset %q bind_address %q innodb_flush_log_at_trx_commit %d max_connections %d",
			dbName, user, charset, bind, flush, maxConn)
	}

	if _, err := db.ExecContext(c, `CREATE TABLE locks (name VARCHAR(64) PRIMARY KEY, owner TEXT NOT NULL, at DATETIME NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if _, err := db.ExecContext(c, `INSERT INTO locks VALUES (?, ?, ?), (?, ?, ?)`, "a", "x", at, "b", "y", at); err != nil {
		t.Fatal(err)
	}
	if got := mdbOwners(t, db); got != "a=x,b=y" {
		t.Errorf("read back %q, want %q", got, "a=x,b=y")
	}
	var gotAt time.Time // parseTime=true: DATETIME scans into time.Time
	if err := db.QueryRowContext(c, `SELECT at FROM locks WHERE name = 'a'`).Scan(&gotAt); err != nil || !gotAt.Equal(at) {
		t.Errorf("read back time %v, %v; want %v", gotAt, err, at)
	}

	// The grant tables are in force: a user with a password is refused
	// a wrong one.
	if _, err := db.ExecContext(c, `CREATE USER 'locker'@'127.0.0.1' IDENTIFIED BY 'secret'`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(c, `GRANT SELECT ON test.* TO 'locker'@'127.0.0.1'`); err != nil {
		t.Fatal(err)
	}
	for pw, wantOK := range map[string]bool{"secret": true, "wrong": false} {
		cfg := mariadbConfig(m.Port())
		cfg.User, cfg.Passwd = "locker", pw
		udb, err := sql.Open("mysql", cfg.FormatDSN())
		if err != nil {
			t.Fatal(err)
		}
		err = udb.PingContext(c)
		udb.Close()
		var me *mysql.MySQLError
		switch {
		case wantOK && err != nil:
			t.Errorf("locker with the right password: %v", err)
		case !wantOK && !(errors.As(err, &me) && me.Number == 1045): // ER_ACCESS_DENIED_ERROR
			t.Errorf("locker with a wrong password: %v, want access denied (1045)", err)
		}
	}
}

// mdbOwners returns the rows of the table locks as "name=owner,...".
func mdbOwners(t *testing.T, db *sql.DB) string {
	t.Helper()
	rows, err := db.QueryContext(ctx(t, queryTimeout), `SELECT CONCAT(name, '=', owner) FROM locks ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		got = append(got, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(got, ",")
}

func TestMariaDBKillRestart(t *testing.T) {
	m := StartMariaDB(t)
	db := mdbOpen(t, m)
	c := ctx(t, queryTimeout)
	if _, err := db.ExecContext(c, `CREATE TABLE locks (name VARCHAR(64) PRIMARY KEY, owner TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(c, `INSERT INTO locks VALUES ('a', 'x')`); err != nil {
		t.Fatal(err)
	}
	// Uncommitted: must be gone after the crash.
	tx, err := db.BeginTx(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(c, `INSERT INTO locks VALUES ('b', 'y')`); err != nil {
		t.Fatal(err)
	}

	port, oldPID := m.Port(), m.PID()
	procs := processes(t, oldPID)
	if err := m.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	checkGone(t, "after Kill", procs)
	if m.PID() != 0 {
		t.Errorf("PID() = %d after Kill, want 0", m.PID())
	}
	checkRefused(t, m.Addr())
	if err := m.Resume(); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Resume after Kill: %v, want ErrNotRunning", err)
	}
	_ = tx.Rollback() // its connection is dead

	if err := m.Restart(); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if m.Port() != port {
		t.Errorf("port changed from %d to %d", port, m.Port())
	}
	if m.PID() == 0 || m.PID() == oldPID {
		t.Errorf("PID() = %d after Restart, was %d", m.PID(), oldPID)
	}
	if got := mdbOwners(t, db); got != "a=x" {
		t.Errorf("after Kill and Restart: %q, want the committed row only, %q", got, "a=x")
	}
	if _, err := db.ExecContext(ctx(t, queryTimeout), `INSERT INTO locks VALUES ('c', 'z')`); err != nil {
		t.Fatal(err)
	}

	// A clean stop keeps the data too.
	procs = processes(t, m.PID())
	if err := m.Shutdown(); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	checkGone(t, "after Shutdown", procs)
	checkRefused(t, m.Addr())
	if err := m.Restart(); err != nil {
		t.Fatalf("Restart after Shutdown: %v", err)
	}
	if got := mdbOwners(t, db); got != "a=x,c=z" {
		t.Errorf("after Shutdown and Restart: %q, want %q", got, "a=x,c=z")
	}

	if err := m.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := m.Restart(); !errors.Is(err, ErrStopped) {
		t.Errorf("Restart after Stop: %v, want ErrStopped", err)
	}
}

func TestMariaDBPause(t *testing.T) {
	m := StartMariaDB(t)
	db := mdbOpen(t, m)
	db.SetMaxOpenConns(1) // the query below uses the connection opened here
	if err := db.PingContext(ctx(t, queryTimeout)); err != nil {
		t.Fatal(err)
	}
	if err := m.Pause(); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	checkStopped(t, "paused", processes(t, m.PID()))

	start := time.Now()
	var one int
	err := db.QueryRowContext(ctx(t, pausedTimeout), `SELECT 1`).Scan(&one)
	if err == nil {
		t.Fatal("query on an open connection to a paused server succeeded")
	}
	if took := time.Since(start); took < pausedTimeout*9/10 {
		t.Errorf("query on a paused server failed after %v, before its deadline: %v", took, err)
	}
	// A new connection gets no answer either.
	start = time.Now()
	if err := mdbOpen(t, m).PingContext(ctx(t, pausedTimeout)); err == nil {
		t.Fatal("connected to a paused server")
	} else if took := time.Since(start); took < pausedTimeout*9/10 {
		t.Errorf("connection to a paused server failed after %v, before its deadline: %v", took, err)
	}

	if err := m.Resume(); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if err := db.QueryRowContext(ctx(t, queryTimeout), `SELECT 1`).Scan(&one); err != nil || one != 1 {
		t.Fatalf("after Resume: SELECT 1 = %d, %v", one, err)
	}
}

func TestMariaDBStartError(t *testing.T) {
	tmp := privateTempDir(t)
	m, err := NewMariaDB(WithArgs("--no-such-option=1"))
	if err == nil {
		m.Stop()
		t.Fatal("NewMariaDB with a bad option succeeded")
	}
	for _, want := range []string{"--- end of mariadb output", "unknown variable 'no-such-option=1'"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not contain %q:\n%v", want, err)
		}
	}
	checkEmpty(t, tmp)
}
