//go:build linux

package sqltest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// pbConnect opens a connection to dsn (of a PgBouncer) that the test
// closes at its end.
func pbConnect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx(t, queryTimeout), dsn)
	if err != nil {
		t.Fatalf("connect to %s: %v", dsn, err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(c)
	})
	return conn
}

// backendPID returns the pid of the server backend that runs a query of
// conn.
func backendPID(t *testing.T, conn *pgx.Conn) int {
	t.Helper()
	var pid int
	if err := conn.QueryRow(ctx(t, queryTimeout), `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return pid
}

// pbShow runs the admin console command cmd (SHOW POOLS, SHOW CONFIG, ...)
// and returns its rows, each column by name, as text.
func pbShow(t *testing.T, admin *pgx.Conn, cmd string) []map[string]string {
	t.Helper()
	rows, err := admin.Query(ctx(t, queryTimeout), cmd)
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	defer rows.Close()
	var out []map[string]string
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		row := map[string]string{}
		for i, fd := range rows.FieldDescriptions() {
			if vals[i] != nil {
				row[fd.Name] = fmt.Sprint(vals[i])
			}
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	return out
}

// pbConfig returns SHOW CONFIG as a map from setting to value.
func pbConfig(t *testing.T, admin *pgx.Conn) map[string]string {
	t.Helper()
	cfg := map[string]string{}
	for _, row := range pbShow(t, admin, "SHOW CONFIG") {
		cfg[row["key"]] = row["value"]
	}
	return cfg
}

// pbPool returns the row of SHOW POOLS for the database Database.
func pbPool(t *testing.T, admin *pgx.Conn) map[string]string {
	t.Helper()
	for _, row := range pbShow(t, admin, "SHOW POOLS") {
		if row["database"] == Database && row["user"] == PostgresUser {
			return row
		}
	}
	t.Fatalf("SHOW POOLS has no pool for %s/%s", Database, PostgresUser)
	return nil
}

func TestPgBouncerQuery(t *testing.T) {
	pg := StartPostgres(t)
	pb := StartPgBouncer(t, pg)
	if pb.Port() == 0 || pb.Port() == pg.Port() || pb.Port() == 5432 || pb.Port() == 6432 {
		t.Errorf("Port() = %d (postgres on %d), want a free port of its own", pb.Port(), pg.Port())
	}
	want := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/test?sslmode=disable&default_query_exec_mode=exec", pb.Port())
	if got := pb.DSN(); got != want {
		t.Errorf("DSN() = %q, want %q", got, want)
	}
	want = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/pgbouncer?sslmode=disable&default_query_exec_mode=simple_protocol", pb.Port())
	if got := pb.AdminDSN(); got != want {
		t.Errorf("AdminDSN() = %q, want %q", got, want)
	}
	if got, want := pb.Addr(), "127.0.0.1:"+strconv.Itoa(pb.Port()); got != want {
		t.Errorf("Addr() = %q, want %q", got, want)
	}
	if pb.Postgres() != pg {
		t.Errorf("Postgres() is not the server it was started in front of")
	}
	if !strings.HasPrefix(pb.LogPath(), pb.Dir()+string(os.PathSeparator)) {
		t.Errorf("LogPath() = %q, not in Dir() = %q", pb.LogPath(), pb.Dir())
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup(postgresUser)
		if err != nil {
			t.Fatal(err)
		}
		if got := processUID(t, pb.PID()); strconv.Itoa(got) != u.Uid {
			t.Errorf("running as root: pgbouncer runs as uid %d, want %s (%s)", got, u.Uid, postgresUser)
		}
	}

	conn := pbConnect(t, pb.DSN())
	c := ctx(t, queryTimeout)
	var db, usr, dataDir string
	err := conn.QueryRow(c, `SELECT current_database(), current_user, current_setting('data_directory')`).Scan(&db, &usr, &dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if db != Database || usr != PostgresUser || dataDir != pg.dataDir {
		t.Errorf("connected to database %q as %q of %s, want %q as %q of %s", db, usr, dataDir, Database, PostgresUser, pg.dataDir)
	}
	if _, err := conn.Exec(c, `CREATE TABLE locks (name text PRIMARY KEY, owner text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(c, `INSERT INTO locks VALUES ($1, $2), ($3, $4)`, "a", "x", "b", "y"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(c); err != nil {
		t.Fatal(err)
	}
	// Written through PgBouncer, read directly.
	direct := pgConnect(t, pg)
	if got := pgOwners(t, direct); got != "a=x,b=y" {
		t.Errorf("read back %q, want %q", got, "a=x,b=y")
	}

	// The startup parameters that other drivers send are accepted.
	cc, err := pgx.ParseConfig(pb.DSN())
	if err != nil {
		t.Fatal(err)
	}
	if cc.DefaultQueryExecMode != pgx.QueryExecModeExec {
		t.Errorf("DSN() gives pgx the query exec mode %v, want exec", cc.DefaultQueryExecMode)
	}
	cc.RuntimeParams["extra_float_digits"] = "2"
	cc.RuntimeParams["default_query_exec_mode"] = "exec"
	if c2, err := pgx.ConnectConfig(ctx(t, queryTimeout), cc); err != nil {
		t.Errorf("connect with the startup parameters extra_float_digits and default_query_exec_mode: %v", err)
	} else {
		c2.Close(ctx(t, time.Second))
	}

	// Many clients, each with many queries with arguments and a
	// transaction, share the few server connections of the pool.
	const clients, queries = 12, 50
	var wg sync.WaitGroup
	errs := make([]error, clients)
	for i := range clients {
		wg.Go(func() { errs[i] = exercisePgBouncer(ctx(t, queryTimeout), pb.DSN(), i, queries) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	var backends int
	err = direct.QueryRow(ctx(t, queryTimeout), `SELECT count(*) FROM pg_stat_activity
		WHERE backend_type = 'client backend' AND datname = $1 AND pid <> pg_backend_pid()`, Database).Scan(&backends)
	if err != nil {
		t.Fatal(err)
	}
	if backends < 1 || backends > PgBouncerPoolSize {
		t.Errorf("%d clients through PgBouncer: postgres has %d client backends, want 1 to %d (default_pool_size)",
			clients+1, backends, PgBouncerPoolSize)
	}
}

// exercisePgBouncer connects to dsn and runs queries with arguments, then
// a transaction.
func exercisePgBouncer(c context.Context, dsn string, client, queries int) error {
	conn, err := pgx.Connect(c, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for i := range queries {
		var n int64
		var s string
		if err := conn.QueryRow(c, `SELECT $1::int8 * 2, $2::text`, int64(i), "hi").Scan(&n, &s); err != nil {
			return fmt.Errorf("client %d, query %d: %w", client, i, err)
		}
		if n != int64(2*i) || s != "hi" {
			return fmt.Errorf("client %d, query %d: got %d, %q", client, i, n, s)
		}
	}
	return pgx.BeginFunc(c, conn, func(tx pgx.Tx) error {
		_, err := tx.Exec(c, `INSERT INTO locks VALUES ($1, 'z')`, "client"+strconv.Itoa(client))
		return err
	})
}

// PgBouncer pools transactions: two client connections share one server
// connection, each holding it only for a statement or a transaction, and
// session state (here a session-level advisory lock) stays with the
// server connection, whichever client took it.
func TestPgBouncerTransactionPooling(t *testing.T) {
	pg := StartPostgres(t)
	pb := StartPgBouncer(t, pg, WithArgs("default_pool_size=1"))
	admin := pbConnect(t, pb.AdminDSN())
	cfg := pbConfig(t, admin)
	if cfg["pool_mode"] != "transaction" || cfg["default_pool_size"] != "1" || cfg["conffile"] != pb.conf {
		t.Errorf("SHOW CONFIG: pool_mode=%q default_pool_size=%q conffile=%q, want transaction, 1, %s",
			cfg["pool_mode"], cfg["default_pool_size"], cfg["conffile"], pb.conf)
	}

	a, b := pbConnect(t, pb.DSN()), pbConnect(t, pb.DSN())
	pid := backendPID(t, a)
	if got := backendPID(t, b); got != pid {
		t.Fatalf("two clients in turn, one server connection: backends %d and %d", pid, got)
	}
	if pool := pbPool(t, admin); pool["pool_mode"] != "transaction" || pool["cl_active"] != "2" {
		t.Errorf("SHOW POOLS: pool_mode=%q cl_active=%q, want transaction, 2 (%v)", pool["pool_mode"], pool["cl_active"], pool)
	}

	// A session-level advisory lock taken through a is held by the
	// server connection, which b then uses too: b "takes" it as well.
	c := ctx(t, queryTimeout)
	var got bool
	if err := a.QueryRow(c, `SELECT pg_try_advisory_lock(1)`).Scan(&got); err != nil || !got {
		t.Fatalf("a: pg_try_advisory_lock(1) = %v, %v", got, err)
	}
	if err := b.QueryRow(c, `SELECT pg_try_advisory_lock(1)`).Scan(&got); err != nil || !got {
		t.Errorf("b: pg_try_advisory_lock(1) = %v, %v; want true, on a's server connection", got, err)
	}
	var held int
	err := pgConnect(t, pg).QueryRow(c, `SELECT count(*) FROM pg_locks
		WHERE locktype = 'advisory' AND objid = 1 AND pid = $1 AND granted`, pid).Scan(&held)
	if err != nil || held != 1 {
		t.Errorf("the advisory lock of backend %d: %d rows in pg_locks, %v", pid, held, err)
	}
	if _, err := a.Exec(c, `SELECT pg_advisory_unlock_all()`); err != nil {
		t.Fatal(err)
	}

	// A transaction holds the server connection to its end: b waits.
	tx, err := a.Begin(c)
	if err != nil {
		t.Fatal(err)
	}
	if got := backendPID(t, a); got != pid {
		t.Errorf("a's transaction runs on backend %d, want %d", got, pid)
	}
	type result struct {
		pid int
		err error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.err = b.QueryRow(c, `SELECT pg_backend_pid()`).Scan(&r.pid)
		done <- r
	}()
	awaitPool(t, admin, "cl_waiting", "1", done)
	if err := tx.Commit(c); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.err != nil || r.pid != pid {
		t.Errorf("b after a's commit: backend %d, %v; want %d", r.pid, r.err, pid)
	}
}

// awaitPool waits until the column col of the test database's row of
// SHOW POOLS is want. It fails the test if something is received on
// early first.
func awaitPool[T any](t *testing.T, admin *pgx.Conn, col, want string, early <-chan T) {
	t.Helper()
	deadline := time.Now().Add(queryTimeout)
	tick := time.NewTicker(statePoll)
	defer tick.Stop()
	for {
		pool := pbPool(t, admin)
		if pool[col] == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("SHOW POOLS: %s=%q after %v, want %q (%v)", col, pool[col], queryTimeout, want, pool)
		}
		select {
		case v := <-early:
			t.Fatalf("received %v while waiting for SHOW POOLS %s=%q", v, col, want)
		case <-tick.C:
		}
	}
}

func TestPgBouncerKillRestart(t *testing.T) {
	pg := StartPostgres(t)
	pb := StartPgBouncer(t, pg)
	conn := pbConnect(t, pb.DSN())
	backend := backendPID(t, conn)
	backendProc, err := readStat(backend)
	if err != nil {
		t.Fatal(err)
	}

	port, oldPID := pb.Port(), pb.PID()
	procs := processes(t, oldPID)
	if err := pb.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	checkGone(t, "after Kill", procs)
	if pb.PID() != 0 {
		t.Errorf("PID() = %d after Kill, want 0", pb.PID())
	}
	checkRefused(t, pb.Addr())
	if _, err := conn.Exec(ctx(t, queryTimeout), `SELECT 1`); err == nil {
		t.Error("query on a connection to a killed PgBouncer succeeded")
	}
	// Its server connection's backend ends (it notices the closed
	// connection on its own).
	awaitGoneT(t, backendProc)
	if err := pb.Pause(); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Pause after Kill: %v, want ErrNotRunning", err)
	}
	if err := pb.Kill(); err != nil {
		t.Errorf("second Kill: %v", err)
	}

	if err := pb.Restart(); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if pb.Port() != port {
		t.Errorf("port changed from %d to %d", port, pb.Port())
	}
	if pb.PID() == 0 || pb.PID() == oldPID {
		t.Errorf("PID() = %d after Restart, was %d", pb.PID(), oldPID)
	}
	conn = pbConnect(t, pb.DSN())
	backendPID(t, conn)

	procs = processes(t, pb.PID())
	dir := pb.Dir()
	if err := pb.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	checkGone(t, "after Stop", procs)
	if pb.PID() != 0 {
		t.Errorf("PID() = %d after Stop, want 0", pb.PID())
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("directory %s: %v, want it removed", dir, err)
	}
	// The port is free again.
	l, err := net.Listen("tcp", pb.Addr())
	if err != nil {
		t.Errorf("port %d not free after Stop: %v", pb.Port(), err)
	} else {
		l.Close()
	}
	if err := pb.Restart(); !errors.Is(err, ErrStopped) {
		t.Errorf("Restart after Stop: %v, want ErrStopped", err)
	}
	if err := pb.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	// The server behind it is untouched.
	backendPID(t, pgConnect(t, pg))
}

// awaitGoneT fails the test unless the process pi ends.
func awaitGoneT(t *testing.T, pi procInfo) {
	t.Helper()
	if err := awaitGone([]procInfo{pi}); err != nil {
		t.Error(err)
	}
}

func TestPgBouncerPause(t *testing.T) {
	pg := StartPostgres(t)
	pb := StartPgBouncer(t, pg)
	conn := pbConnect(t, pb.DSN())
	backendPID(t, conn)
	if err := pb.Pause(); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	checkStopped(t, "paused", processes(t, pb.PID()))

	start := time.Now()
	if _, err := conn.Exec(ctx(t, pausedTimeout), `SELECT 1`); err == nil {
		t.Fatal("query through a paused PgBouncer succeeded")
	} else if took := time.Since(start); took < pausedTimeout*9/10 {
		t.Errorf("query through a paused PgBouncer failed after %v, before its deadline: %v", took, err)
	}
	start = time.Now()
	if c2, err := pgx.Connect(ctx(t, pausedTimeout), pb.DSN()); err == nil {
		c2.Close(ctx(t, time.Second))
		t.Fatal("connected to a paused PgBouncer")
	} else if took := time.Since(start); took < pausedTimeout*9/10 {
		t.Errorf("connection to a paused PgBouncer failed after %v, before its deadline: %v", took, err)
	}
	// The server behind it still answers.
	backendPID(t, pgConnect(t, pg))

	if err := pb.Resume(); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	backendPID(t, pbConnect(t, pb.DSN()))
}

// Clients of a PgBouncer whose server is killed wait for a server
// connection (or fail), and are served again once it is restarted,
// without restarting PgBouncer.
func TestPgBouncerPostgresKilled(t *testing.T) {
	pg := StartPostgres(t)
	pb := StartPgBouncer(t, pg)
	conn := pbConnect(t, pb.DSN())
	backendPID(t, conn)
	if err := pg.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx(t, pausedTimeout), `SELECT 1`); err == nil {
		t.Error("query through PgBouncer to a killed server succeeded")
	}
	if err := pg.Restart(); err != nil {
		t.Fatal(err)
	}
	// Until PgBouncer's next login to the server succeeds (it retries a
	// few times a second), new clients are turned away: "server login
	// has been failing, try again later (server_login_retry)".
	deadline := time.Now().Add(queryTimeout)
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for attempt := 1; ; attempt++ {
		c, err := pgx.Connect(ctx(t, queryTimeout), pb.DSN())
		if err == nil {
			_, err = c.Exec(ctx(t, queryTimeout), `SELECT 1`)
			c.Close(ctx(t, time.Second))
		}
		if err == nil {
			t.Logf("served again at attempt %d", attempt)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no query through PgBouncer %v after the server's restart: %v", queryTimeout, err)
		}
		<-tick.C
	}
}

func TestPgBouncerStartError(t *testing.T) {
	pg := StartPostgres(t)
	tmp := privateTempDir(t)
	pb, err := NewPgBouncer(pg, WithArgs("pool_mode=bogus"))
	if err == nil {
		pb.Stop()
		t.Fatal("NewPgBouncer with a bad setting succeeded")
	}
	for _, want := range []string{"--- end of pgbouncer output", `invalid value "bogus" for parameter pool_mode`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not contain %q:\n%v", want, err)
		}
	}
	if _, err := NewPgBouncer(pg, WithArgs("-v")); err == nil || !strings.Contains(err.Error(), "name=value") {
		t.Errorf("NewPgBouncer(WithArgs(%q)): %v, want an error about name=value", "-v", err)
	}
	if _, err := NewPgBouncer(nil); err == nil {
		t.Error("NewPgBouncer(nil) succeeded")
	}
	checkEmpty(t, tmp)
}

func TestPgBouncerPortTaken(t *testing.T) {
	pg := StartPostgres(t)
	opt, taken, picks := takenPortFirst(t)
	pb := StartPgBouncer(t, pg, opt)
	if pb.Port() == taken || *picks != 2 {
		t.Errorf("port %d after %d picks; port %d was taken", pb.Port(), *picks, taken)
	}
	backendPID(t, pbConnect(t, pb.DSN()))
}

func TestPgBouncerNotFound(t *testing.T) {
	t.Setenv(EnvPgBouncer, "/nonexistent/pgbouncer")
	if _, err := NewPgBouncer(&Postgres{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("NewPgBouncer with %s set to a missing file: %v, want ErrNotFound", EnvPgBouncer, err)
	}
}
