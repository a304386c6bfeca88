//go:build unix

package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sqlstore"
	"github.com/distlock/distlock/sqltest"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The tests of the command on SQL databases: PostgreSQL and MariaDB
// servers started by sqltest, and the distlock binary pointed at them
// with --store, with the defaults a user gets (no sslmode, the default
// table, notifications on PostgreSQL, polling on MariaDB).

// postgresURL is the URL a user would give for the database of pg, as
// user (and password, if not empty): no parameters.
func postgresURL(pg *sqltest.Postgres, user, password string) string {
	info := user
	if password != "" {
		info += ":" + password
	}
	return "postgres://" + info + "@" + pg.Addr() + "/" + sqltest.Database
}

// mariadbURL is the mysql:// URL of the database of m, as user (and
// password, if not empty).
func mariadbURL(m *sqltest.MariaDB, user, password string) string {
	info := user
	if password != "" {
		info += ":" + password
	}
	return "mysql://" + info + "@" + m.Addr() + "/" + sqltest.Database
}

// newPostgresClient returns a distlock client on pg, as its superuser,
// closed with its pool when the test ends.
func newPostgresClient(t *testing.T, pg *sqltest.Postgres) *distlock.Client {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), pg.DSN())
	if err != nil {
		t.Fatal(err)
	}
	c := distlock.New(sqlstore.NewPostgres(pool), distlock.WithLogger(nil))
	t.Cleanup(func() {
		_ = c.Close()
		pool.Close()
	})
	return c
}

// openMariaDB opens the database of m as its superuser, with several
// statements allowed in one Exec, closed when the test ends.
func openMariaDB(t *testing.T, m *sqltest.MariaDB) *sql.DB {
	t.Helper()
	cfg, err := mysql.ParseDSN(m.DSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.MultiStatements = true
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(connector)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// newMariaDBClient returns a distlock client on db, closed when the test
// ends.
func newMariaDBClient(t *testing.T, db *sql.DB) *distlock.Client {
	t.Helper()
	c := distlock.New(sqlstore.NewMySQL(db), distlock.WithLogger(nil))
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestSQLPostgres runs the commands on PostgreSQL: a mutex (run, a second
// run waiting its turn, --wait 0, status, list, unlock --force), a fair
// mutex serving its waiters in order, the other kinds with a queue,
// --once-per, permits, and the table parameter.
func TestSQLPostgres(t *testing.T) {
	t.Parallel()
	pg := sqltest.StartPostgres(t)
	url := postgresURL(pg, sqltest.PostgresUser, "")
	c := newPostgresClient(t, pg)

	t.Run("mutex", func(t *testing.T) {
		t.Parallel()
		sqlMutexScenario(t, url, c, false)
	})
	t.Run("fair", func(t *testing.T) {
		t.Parallel()
		sqlFairScenario(t, url, c)
	})
	sqlKindsScenario(t, url)
	t.Run("once-per", func(t *testing.T) {
		t.Parallel()
		sqlOncePerScenario(t, url)
	})
	t.Run("permits", func(t *testing.T) {
		t.Parallel()
		r := run(t, "permits", "--store", url, "api", "3")
		r.wantCode(t, 0)
		if !strings.Contains(r.stdout, "permits of api:") || !strings.Contains(r.stdout, "3 now") {
			t.Errorf("permits printed %q", r.stdout)
		}
	})
	t.Run("pgbouncer", func(t *testing.T) {
		t.Parallel()
		pb := sqltest.StartPgBouncer(t, pg)
		sqlPollingScenario(t, "postgres://"+sqltest.PostgresUser+"@"+pb.Addr()+"/"+sqltest.Database+"?notify=off&default_query_exec_mode=exec")
	})
	t.Run("table", func(t *testing.T) {
		t.Parallel()
		tabled := url + "?table=team_locks"
		holder, token := startHolder(t, nil, "--store", tabled, "tabled")
		st := statusJSONOf(t, "--store", tabled, "tabled")
		if !st.Locked || st.Holder == nil || st.Holder.PID != holder.cmd.Process.Pid || st.Token != token {
			t.Errorf("status --json = %+v, want tabled held by %d with token %d", st, holder.cmd.Process.Pid, token)
		}
		if st := statusJSONOf(t, "--store", url, "tabled"); st.Locked {
			t.Errorf("in the default table, status --json = %+v, want tabled free", st)
		}
		conn := connectPostgres(t, pg)
		var n int
		if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM team_locks WHERE name = 'tabled' AND owner_id IS NOT NULL`).Scan(&n); err != nil || n != 1 {
			t.Errorf("team_locks has %d held rows of tabled (%v), want 1", n, err)
		}
	})
}

// TestSQLMariaDB runs the commands on MariaDB, whose waiters poll: a
// mutex (run, a second run waiting its turn, --wait 0, status, list,
// unlock --force), --once-per, and the table parameter.
func TestSQLMariaDB(t *testing.T) {
	t.Parallel()
	m := sqltest.StartMariaDB(t)
	url := mariadbURL(m, sqltest.MariaDBUser, "")
	db := openMariaDB(t, m)
	c := newMariaDBClient(t, db)

	t.Run("mutex", func(t *testing.T) {
		t.Parallel()
		sqlMutexScenario(t, url, c, true)
	})
	t.Run("once-per", func(t *testing.T) {
		t.Parallel()
		sqlOncePerScenario(t, url)
	})
	t.Run("table", func(t *testing.T) {
		t.Parallel()
		run(t, "run", "--store", url+"?table=team_locks", "tabled", "--", "true").wantCode(t, 0)
		var n int
		err := db.QueryRow(`SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name IN ('team_locks', 'team_locks_once')`).Scan(&n)
		if err != nil || n != 2 {
			t.Errorf("%d tables team_locks and team_locks_once (%v), want 2", n, err)
		}
	})
}

// sqlMutexScenario runs the everyday uses of a mutex on the SQL store at
// url, on which c is a client: a run holds the lock while its command
// runs; a second run with --wait 0 is refused (75) and names the holder;
// a second run with the default --wait (forever) waits, and runs once the
// first is done, with a higher token; status and list show the holder in
// text and JSON; unlock --force takes a lock from its run, whose command
// is stopped (70). A store that polls (polls) tells the holder of the
// revocation at its next renewal, a third of --ttl later: it says it lost
// the lock, not that it was revoked.
func sqlMutexScenario(t *testing.T, url string, c *distlock.Client, polls bool) {
	host, _ := os.Hostname()
	dir := t.TempDir()
	ready, token1, release, order := filepath.Join(dir, "ready"), filepath.Join(dir, "token1"), filepath.Join(dir, "release"), filepath.Join(dir, "order")
	first := start(t, []string{"READY=" + ready, "TOKEN=" + token1, "RELEASE=" + release, "ORDER=" + order},
		"run", "--store", url, "job", "--", "sh", "-c",
		`echo "$DISTLOCK_TOKEN" >"$TOKEN"; touch "$READY"; while [ ! -e "$RELEASE" ]; do sleep 0.05; done; echo first >>"$ORDER"`)
	awaitFile(t, ready)
	token, err := strconv.ParseUint(strings.TrimSpace(readFile(t, token1)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	holder := fmt.Sprintf("%s/%d", host, first.cmd.Process.Pid)
	if info := inspect(t, c, "job"); !info.Locked || info.Holder.PID != first.cmd.Process.Pid || info.Token != token {
		t.Fatalf("the library sees %+v, want job held by %s with token %d", info, holder, token)
	}

	checkHeldNow(t, url, "job", holder)

	token2 := filepath.Join(dir, "token2")
	second := start(t, []string{"TOKEN=" + token2, "ORDER=" + order}, "run", "--store", url, "job", "--", "sh", "-c",
		`echo "$DISTLOCK_TOKEN" >"$TOKEN"; echo second >>"$ORDER"`)
	awaitOutput(t, second.stderr, "waiting for job")

	checkStatusHeld(t, url, "job", first, host, token)

	r := run(t, "list", "--store", url, "jo*")
	r.wantCode(t, 0)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "NAME") || !strings.HasPrefix(lines[1], "job ") || !strings.Contains(lines[1], holder) {
		t.Errorf("list jo* printed:\n%s\nwant job held by %s", r.stdout, holder)
	}
	checkListJSON(t, url, "job", first, holder)

	releaseFirst(t, release, first, second)
	if got := readFile(t, order); got != "first\nsecond\n" {
		t.Errorf("the commands wrote %q, want first then second: the second ran while the first held the lock", got)
	}
	if next, err := strconv.ParseUint(strings.TrimSpace(readFile(t, token2)), 10, 64); err != nil || next <= token {
		t.Errorf("second token %d (%v), want above the first's %d", next, err, token)
	}

	why := "revoked"
	if polls {
		why = "no longer held"
	}
	checkForcedUnlock(t, url, host, why)

	// --now frees the lock at once; its holder learns of it at its next
	// renewal at the latest, after the test.
	startHolder(t, nil, "--store", url, "forced-now")
	r = run(t, "unlock", "--store", url, "--force", "--now", "forced-now")
	r.wantCode(t, 0)
	if !strings.Contains(r.stdout, "released forced-now") {
		t.Errorf("unlock --now printed %q", r.stdout)
	}
	if st := statusJSONOf(t, "--store", url, "forced-now"); st.Locked {
		t.Errorf("status after unlock --force --now = %+v, want free", st)
	}
}

// sqlPollingScenario checks that a run that waits for a lock on the SQL
// store at url, whose waiters poll (notify=off through PgBouncer in
// transaction mode), runs once the holder is done, and not before.
func sqlPollingScenario(t *testing.T, url string) {
	dir := t.TempDir()
	out, goFile, order := filepath.Join(dir, "out"), filepath.Join(dir, "go"), filepath.Join(dir, "order")
	holder := start(t, []string{"OUT=" + out, "GO=" + goFile, "ORDER=" + order}, "run", "--store", url, "bounced", "--", "sh", "-c",
		holdUntilGo+`; echo first >>"$ORDER"`)
	awaitFile(t, out)
	waiter := start(t, []string{"ORDER=" + order}, "run", "--store", url, "bounced", "--", "sh", "-c", `echo second >>"$ORDER"`)
	awaitOutput(t, waiter.stderr, "waiting for bounced")
	if err := os.WriteFile(goFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*proc{holder, waiter} {
		if code := p.wait(); code != 0 {
			t.Fatalf("run: exit %d; stderr %q", code, p.errOut())
		}
	}
	if got := readFile(t, order); got != "first\nsecond\n" {
		t.Errorf("the commands wrote %q, want first then second", got)
	}
}

// sqlFairScenario checks that run --fair, with its defaults, serves the
// waiters of a lock in the order they arrived: two runs queue behind a
// holder, and run one after the other, in that order, once it is done.
func sqlFairScenario(t *testing.T, url string, c *distlock.Client) {
	dir := t.TempDir()
	out, goFile, order := filepath.Join(dir, "out"), filepath.Join(dir, "go"), filepath.Join(dir, "order")
	holder := start(t, []string{"OUT=" + out, "GO=" + goFile}, "run", "--store", url, "--fair", "deploy", "--", "sh", "-c", holdUntilGo)
	awaitFile(t, out)
	var waiters []*proc
	for i, who := range []string{"a", "b", "c"} {
		waiters = append(waiters, start(t, []string{"ORDER=" + order, "WHO=" + who},
			"run", "--store", url, "--fair", "deploy", "--", "sh", "-c", `echo "$WHO" >>"$ORDER"; sleep 0.2`))
		awaitQueued(t, c, "deploy", i+1)
	}
	st := statusJSONOf(t, "--store", url, "deploy")
	if !st.Locked || st.Kind != "fair-mutex" || !st.Fair || st.Queued != 3 || st.Holder == nil || st.Holder.PID != holder.cmd.Process.Pid {
		t.Errorf("status --json = %+v, want a fair-mutex held by %d with 3 queued", st, holder.cmd.Process.Pid)
	}
	if err := os.WriteFile(goFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := holder.wait(); code != 0 {
		t.Fatalf("holder: exit %d; stderr %q", code, holder.errOut())
	}
	for i, w := range waiters {
		if code := w.wait(); code != 0 {
			t.Fatalf("waiter %d: exit %d; stderr %q", i, code, w.errOut())
		}
	}
	if got := readFile(t, order); got != "a\nb\nc\n" {
		t.Errorf("the waiters ran in the order %q, want a, b, c: the order they queued in", got)
	}
}

// sqlKindsScenario runs the other kinds of lock with a queue (--shared,
// --exclusive, --semaphore) on the SQL store at url, in parallel
// subtests, as TestEtcdQueuedKinds does on etcd: a run holds the lock, a
// conflicting run with --wait 0 is refused (75), a plain run is refused
// for the kind (78), status --json shows the kind and the holder, and
// unlock --force stops the holder (70).
func sqlKindsScenario(t *testing.T, url string) {
	for _, tc := range []struct {
		name     string
		flags    []string // of the holder
		conflict []string // of a run that the holder keeps out
		kind     string
	}{
		{"shared", []string{"--shared"}, []string{"--exclusive"}, "rwmutex"},
		{"exclusive", []string{"--exclusive"}, []string{"--shared"}, "rwmutex"},
		{"semaphore", []string{"--semaphore", "2"}, []string{"--semaphore", "2", "--permits", "2"}, "semaphore"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			checkQueuedKind(t, url, "kind-"+tc.name, tc.flags, tc.conflict, tc.kind)
		})
	}
}

// sqlOncePerScenario runs a command with --once-per twice in a period on
// the SQL store at url: the first runs it, the second finds the period
// done (0) and does not, and status shows the run.
func sqlOncePerScenario(t *testing.T, url string) {
	dir := t.TempDir()
	first, second := filepath.Join(dir, "first"), filepath.Join(dir, "second")
	run(t, "run", "--store", url, "--once-per", "1h", "nightly", "--", "touch", first).wantCode(t, 0)
	run(t, "run", "--store", url, "--once-per", "1h", "nightly", "--", "touch", second).wantCode(t, 0)
	if _, err := os.Stat(first); err != nil {
		t.Errorf("the first run did not run its command: %v", err)
	}
	if _, err := os.Stat(second); err == nil {
		t.Error("the second run of the period ran its command")
	}
	if st := statusJSONOf(t, "--store", url, "nightly"); st.LastRun == nil || st.LastRun.Period == 0 || st.LastRun.Error != "" {
		t.Errorf("status --json = %+v, want the last run of a period, succeeded", st)
	}
}

// connectPostgres connects to pg as its superuser, until the test ends.
func connectPostgres(t *testing.T, pg *sqltest.Postgres) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), pg.DSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// The passwords of the users of TestSQLAuth.
const (
	appPassword    = "app-sekret"
	nobodyPassword = "nobody-sekret"
)

// TestSQLAuth applies the output of sql-schema to fresh PostgreSQL and
// MariaDB servers, as teams that run their own migrations do, and runs
// the commands as users with passwords: one allowed to read and write
// the tables (which the command then uses as they are), one not allowed
// to use them, and one with a wrong password. The refusals fail with
// status 77 and say which; no output shows a password.
func TestSQLAuth(t *testing.T) {
	t.Parallel()
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		pg := sqltest.StartPostgres(t)
		conn := connectPostgres(t, pg)
		ctx := context.Background()
		r := run(t, "sql-schema", "postgres")
		r.wantCode(t, 0)
		for range 2 { // it applies to a fresh database, and again
			if _, err := conn.Exec(ctx, r.stdout); err != nil {
				t.Fatalf("applying sql-schema postgres: %v\n%s", err, r.stdout)
			}
		}
		var made bool
		if err := conn.QueryRow(ctx, `SELECT to_regclass('distlock_locks') IS NOT NULL AND to_regclass('distlock_locks_once') IS NOT NULL`).Scan(&made); err != nil || !made {
			t.Fatalf("the schema made the tables: %v (%v)", made, err)
		}
		_, err := conn.Exec(ctx, `CREATE ROLE app LOGIN PASSWORD '`+appPassword+`';
CREATE ROLE nobody LOGIN PASSWORD '`+nobodyPassword+`';
GRANT SELECT, INSERT, UPDATE, DELETE ON distlock_locks, distlock_locks_once TO app`)
		if err != nil {
			t.Fatal(err)
		}
		requirePasswords(t, pg, conn, "app", "nobody")

		addr := pg.Addr()
		app := postgresURL(pg, "app", appPassword)
		sqlAuthScenario(t, app, nil, []refusal{
			{"wrong password/run", []string{"run", "--store", postgresURL(pg, "app", "wrong-sekret"), "job", "--", "true"},
				[]string{"PostgreSQL at " + addr + " refused the credentials", "28P01"}},
			{"wrong password/status", []string{"status", "--store", postgresURL(pg, "app", "wrong-sekret"), "job"},
				[]string{"PostgreSQL at " + addr + " refused the credentials", "28P01"}},
			{"no privileges/run", []string{"run", "--store", postgresURL(pg, "nobody", nobodyPassword), "job", "--", "true"},
				[]string{"PostgreSQL at " + addr + " refused a request to this user", "permission denied", "42501"}},
			{"no privileges/list", []string{"list", "--store", postgresURL(pg, "nobody", nobodyPassword)},
				[]string{"PostgreSQL at " + addr + " refused a request to this user", "42501"}},
			// PostgreSQL 15 and later let no user but the owner create
			// tables in the public schema: the store cannot make its own.
			{"may not create a table", []string{"run", "--store", app + "?table=app_locks", "job", "--", "true"},
				[]string{"refused a request to this user", "app_locks", "distlock sql-schema", "42501"}},
		})
	})

	t.Run("mariadb", func(t *testing.T) {
		t.Parallel()
		m := sqltest.StartMariaDB(t)
		db := openMariaDB(t, m)
		r := run(t, "sql-schema", "mysql")
		r.wantCode(t, 0)
		for range 2 {
			if _, err := db.Exec(r.stdout); err != nil {
				t.Fatalf("applying sql-schema mysql: %v\n%s", err, r.stdout)
			}
		}
		_, err := db.Exec(`CREATE USER 'app'@'%' IDENTIFIED BY '` + appPassword + `';
CREATE USER 'nobody'@'%' IDENTIFIED BY '` + nobodyPassword + `';
GRANT SELECT, INSERT, UPDATE, DELETE ON ` + sqltest.Database + `.distlock_locks TO 'app'@'%';
GRANT SELECT, INSERT, UPDATE, DELETE ON ` + sqltest.Database + `.distlock_locks_once TO 'app'@'%'`)
		if err != nil {
			t.Fatal(err)
		}
		addr := m.Addr()
		app := mariadbURL(m, "app", appPassword)
		// A short lease: the holder learns of unlock --force at its next
		// renewal, a third of --ttl later (MariaDB pushes no notices).
		sqlAuthScenario(t, app, []string{"--ttl", "3s"}, []refusal{
			{"wrong password/run", []string{"run", "--store", mariadbURL(m, "app", "wrong-sekret"), "job", "--", "true"},
				[]string{"MariaDB/MySQL at " + addr + " refused the credentials", "1045"}},
			{"no privileges/status", []string{"status", "--store", mariadbURL(m, "nobody", nobodyPassword), "job"},
				[]string{"MariaDB/MySQL at " + addr + " refused a request to this user", "1044"}},
			{"may not create a table", []string{"run", "--store", app + "?table=app_locks", "job", "--", "true"},
				[]string{"refused a request to this user", "app_locks", "1142"}},
		})
	})
}

// A refusal is a command that the store refuses to its user (77), named
// for the log, and what its message must say.
type refusal struct {
	name string
	args []string
	want []string
}

// sqlAuthScenario runs the commands on the SQL store at app as a user,
// with a password, allowed to read and write the tables: a run (with
// holderFlags) holds a lock, status --json shows it, list and unlock
// --force succeed, and the unlocked run ends (70). Then each of refusals
// fails with status 77 and says what it wants; no output shows a
// password.
func sqlAuthScenario(t *testing.T, app string, holderFlags []string, refusals []refusal) {
	holder, token := startHolder(t, nil, append(append([]string{"--store", app}, holderFlags...), "authed")...)
	if st := statusJSONOf(t, "--store", app, "authed"); !st.Locked || st.Holder == nil || st.Holder.PID != holder.cmd.Process.Pid || st.Token != token {
		t.Errorf("status --json = %+v, want authed held by %d with token %d", st, holder.cmd.Process.Pid, token)
	}
	outputs := []result{run(t, "list", "--store", app), run(t, "unlock", "--force", "--store", app, "authed")}
	if code := holder.wait(); code != exitLockLost {
		t.Errorf("the unlocked run: exit %d, want %d; stderr %q", code, exitLockLost, holder.errOut())
	}
	for _, r := range outputs {
		r.wantCode(t, 0)
	}
	for _, tc := range refusals {
		r := run(t, tc.args...)
		t.Logf("%s: %s", tc.name, strings.TrimSpace(r.stderr))
		r.wantCode(t, exitNoPerm)
		wantStderr(t, r, tc.want...)
		outputs = append(outputs, r)
	}
	for _, r := range outputs {
		if strings.Contains(r.stdout+r.stderr, "sekret") {
			t.Errorf("a command printed a password: stdout %q, stderr %q", r.stdout, r.stderr)
		}
	}
}

// requirePasswords makes pg ask the users for their passwords over TCP
// (its servers trust every local user): it adds a line for them at the
// top of pg_hba.conf, reloads the configuration, and waits until a wrong
// password is refused.
func requirePasswords(t *testing.T, pg *sqltest.Postgres, conn *pgx.Conn, users ...string) {
	t.Helper()
	hba := filepath.Join(pg.Dir(), "data", "pg_hba.conf")
	old, err := os.ReadFile(hba)
	if err != nil {
		t.Fatal(err)
	}
	line := fmt.Sprintf("host all %s 127.0.0.1/32 scram-sha-256\n", strings.Join(users, ","))
	if err := os.WriteFile(hba, append([]byte(line), old...), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(context.Background(), `SELECT pg_reload_conf()`); err != nil {
		t.Fatal(err)
	}
	eventually(t, "PostgreSQL to ask for passwords", func() bool {
		c, err := pgx.Connect(context.Background(), postgresURL(pg, users[0], "wrong")+"?sslmode=disable")
		if err == nil {
			_ = c.Close(context.Background())
			return false
		}
		var pgErr *pgconn.PgError
		return errors.As(err, &pgErr) && pgErr.Code == "28P01"
	})
}

// TestSQLDown points every command at PostgreSQL and MariaDB addresses
// where nothing listens: each fails at once with status 69 and says it
// cannot reach the database there, without the password.
func TestSQLDown(t *testing.T) {
	t.Parallel()
	addr := closedAddr(t)
	for _, tc := range []struct{ url, dbms string }{
		{"postgres://app:sekret@" + addr + "/app", "PostgreSQL"},
		{"mysql://app:sekret@" + addr + "/app", "MariaDB/MySQL"},
	} {
		for _, args := range [][]string{
			{"run", "--store", tc.url, "job", "--", "true"},
			{"status", "--store", tc.url, "job"},
			{"list", "--store", tc.url},
			{"unlock", "--store", tc.url, "--force", "job"},
		} {
			t.Run(args[0]+"/"+strings.Split(tc.url, ":")[0], func(t *testing.T) {
				t.Parallel()
				r := run(t, args...)
				t.Logf("%s", strings.TrimSpace(r.stderr))
				wantFailure(t, r, exitUnavailable, "cannot reach "+tc.dbms+" at "+addr, "connection refused")
			})
		}
	}
}

// TestSQLURLErrors checks the usage errors (64) of SQL URLs and of the
// flags that a SQL store does not take, before anything is dialled: each
// is one line that says what is wrong and where the URL came from, and
// never shows the password.
func TestSQLURLErrors(t *testing.T) {
	t.Parallel()
	addr := closedAddr(t)
	pg := "postgres://app:sekret@" + addr + "/app"
	my := "mysql://app:sekret@" + addr + "/app"
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{"postgres unknown parameter", nil, []string{"--store", pg + "?sslmdoe=require"}, []string{"invalid PostgreSQL URL in --store", `unknown parameter "sslmdoe"`}},
		{"postgres bad sslmode", nil, []string{"--store", pg + "?sslmode=sometimes"}, []string{"invalid PostgreSQL URL in --store", "sslmode"}},
		{"postgres bad notify", nil, []string{"--store", pg + "?notify=maybe"}, []string{"notify=maybe", "on or off"}},
		{"postgres bad table", nil, []string{"--store", pg + "?table=Locks"}, []string{`table "Locks"`, "lower-case"}},
		{"postgres two tables", nil, []string{"--store", pg + "?table=a&table=b"}, []string{"give table once"}},
		{"postgres missing host", []string{storeEnv + "=postgresql://app:sekret@/app"}, nil, []string{"invalid PostgreSQL URL in $" + storeEnv, "missing host"}},
		{"postgres bad port", nil, []string{"--store", "postgres://app:sekret@127.0.0.1:99x/app"}, []string{"invalid PostgreSQL URL in --store"}},
		{"postgres --prefix", nil, []string{"--store", pg, "--prefix", "app/"}, []string{"--prefix is for the keys of Redis and etcd", "table parameter"}},
		{"postgres --tls-ca", nil, []string{"--store", pg, "--tls-ca", "/nonexistent"}, []string{"sslrootcert"}},
		{"postgres in --redis", nil, []string{"--redis", pg}, []string{"invalid Redis URL in --redis", "postgres:// URL with --store"}},
		{"mysql in REDIS_URL", []string{"REDIS_URL=" + my}, nil, []string{"invalid Redis URL in $REDIS_URL", "$" + storeEnv}},
		{"mysql unknown parameter", nil, []string{"--store", my + "?parseTime=true"}, []string{"invalid MySQL URL in --store", `unknown parameter "parseTime"`}},
		{"mysql notify", nil, []string{"--store", my + "?notify=off"}, []string{"notify is for PostgreSQL"}},
		{"mysql bad tls", nil, []string{"--store", my + "?tls=custom"}, []string{"tls=custom", "skip-verify"}},
		{"mysql bad timeout", nil, []string{"--store", my + "?timeout=soon"}, []string{"timeout=soon"}},
		{"mysql no database", nil, []string{"--store", "mysql://app:sekret@" + addr}, []string{"/DB"}},
		{"mysql no user", nil, []string{"--store", "mysql://" + addr + "/app"}, []string{"missing USER"}},
		{"mysql bad host", nil, []string{"--store", "mysql://app:sekret@::1:3306/app"}, []string{"brackets"}},
		{"mysql --prefix", nil, []string{"--store", my, "--prefix", "app/"}, []string{"--prefix is for the keys of Redis and etcd", "MariaDB/MySQL"}},
		{"mysql --tls-cert", nil, []string{"--store", my, "--tls-cert", "/nonexistent"}, []string{"tls=true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := distlockEnv(t, tc.env, append(append([]string{"status"}, tc.args...), "name")...)
			wantFailure(t, r, exitUsage, tc.want...)
		})
	}
}

// TestSQLSchemaCommand checks sql-schema's output for each database and
// --table, and its usage errors.
func TestSQLSchemaCommand(t *testing.T) {
	t.Parallel()
	for _, db := range []string{"postgres", "mysql"} {
		r := run(t, "sql-schema", db, "--table", "ops.job_locks")
		r.wantCode(t, 0)
		for _, want := range []string{"CREATE TABLE IF NOT EXISTS ops.job_locks (", "CREATE TABLE IF NOT EXISTS ops.job_locks_once ("} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("sql-schema %s --table ops.job_locks: no %q in:\n%s", db, want, r.stdout)
			}
		}
		if strings.Contains(r.stdout, "{{") {
			t.Errorf("sql-schema %s left a placeholder:\n%s", db, r.stdout)
		}
	}
	if r := run(t, "sql-schema", "mysql"); !strings.Contains(r.stdout, "CREATE TABLE IF NOT EXISTS "+sqlstore.DefaultTable+" (") {
		t.Errorf("sql-schema mysql: not the default table:\n%s", r.stdout)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sql-schema"}, "want one database"},
		{[]string{"sql-schema", "oracle"}, `unknown database "oracle"`},
		{[]string{"sql-schema", "postgres", "mysql"}, "want one database"},
		{[]string{"sql-schema", "postgres", "--table", "Locks"}, "invalid value for --table"},
	} {
		r := run(t, tc.args...)
		r.wantCode(t, exitUsage)
		wantStderr(t, r, tc.want)
	}
}
