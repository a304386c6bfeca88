//go:build linux

package sqltest

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestPostgresWriteRead(t *testing.T) {
	pg := StartPostgres(t)
	if pg.Port() == 0 || pg.Port() == 5432 {
		t.Errorf("Port() = %d, want a free port", pg.Port())
	}
	if got, want := pg.DSN(), fmt.Sprintf("postgres://postgres@127.0.0.1:%d/test?sslmode=disable", pg.Port()); got != want {
		t.Errorf("DSN() = %q, want %q", got, want)
	}
	if got, want := pg.Addr(), "127.0.0.1:"+strconv.Itoa(pg.Port()); got != want {
		t.Errorf("Addr() = %q, want %q", got, want)
	}
	if !strings.HasPrefix(pg.LogPath(), pg.Dir()+string(os.PathSeparator)) {
		t.Errorf("LogPath() = %q, not in Dir() = %q", pg.LogPath(), pg.Dir())
	}
	conn := pgConnect(t, pg)
	c := ctx(t, queryTimeout)

	var db, usr, fsync, fpw, sc, listen string
	var pid, maxConn int
	err := conn.QueryRow(c, `SELECT current_database(), current_user, pg_backend_pid(),
		current_setting('fsync'), current_setting('full_page_writes'),
		current_setting('synchronous_commit'), current_setting('listen_addresses'),
		current_setting('max_connections')::int`).Scan(&db, &usr, &pid, &fsync, &fpw, &sc, &listen, &maxConn)
	if err != nil {
		t.Fatal(err)
	}
	if db != Database || usr != PostgresUser {
		t.Errorf("connected to database %q as %q, want %q as %q", db, usr, Database, PostgresUser)
	}
	if fsync != "off" || fpw != "off" || sc != "on" || listen != "127.0.0.1" || maxConn != 100 {
		t.Errorf("fsync=%s full_page_writes=%s synchronous_commit=%s listen_addresses=%s max_connections=%d",
			fsync, fpw, sc, listen, maxConn)
	}
	// The backend serving us is a child of the postmaster.
	if pi, err := readStat(pid); err != nil || pi.ppid != pg.PID() {
		t.Errorf("backend pid %d: parent %d, %v; want the postmaster, pid %d", pid, pi.ppid, err, pg.PID())
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup(postgresUser)
		if err != nil {
			t.Fatal(err)
		}
		if got := processUID(t, pg.PID()); strconv.Itoa(got) != u.Uid {
			t.Errorf("running as root: postmaster runs as uid %d, want %s (%s)", got, u.Uid, postgresUser)
		}
	}

	if _, err := conn.Exec(c, `CREATE TABLE locks (name text PRIMARY KEY, owner text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(c, `INSERT INTO locks VALUES ($1, $2), ($3, $4)`, "a", "x", "b", "y"); err != nil {
		t.Fatal(err)
	}
	if got := pgOwners(t, conn); got != "a=x,b=y" {
		t.Errorf("read back %q, want %q", got, "a=x,b=y")
	}
}

// pgOwners returns the rows of the table locks as "name=owner,...".
func pgOwners(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	rows, err := conn.Query(ctx(t, queryTimeout), `SELECT name || '=' || owner FROM locks ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(got, ",")
}

func TestPostgresKillRestart(t *testing.T) {
	pg := StartPostgres(t)
	conn := pgConnect(t, pg)
	c := ctx(t, queryTimeout)
	if _, err := conn.Exec(c, `CREATE TABLE locks (name text PRIMARY KEY, owner text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(c, `INSERT INTO locks VALUES ('a', 'x')`); err != nil {
		t.Fatal(err)
	}
	// Uncommitted: must be gone after the crash.
	tx, err := conn.Begin(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(c, `INSERT INTO locks VALUES ('b', 'y')`); err != nil {
		t.Fatal(err)
	}

	port, oldPID := pg.Port(), pg.PID()
	procs := processes(t, oldPID)
	if len(procs) < 3 {
		t.Fatalf("postmaster has %d children, want a few (backends, checkpointer, ...)", len(procs)-1)
	}
	key, id := pgShm(t, pg)
	if err := pg.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	checkGone(t, "after Kill", procs)
	if pg.PID() != 0 {
		t.Errorf("PID() = %d after Kill, want 0", pg.PID())
	}
	if shmExists(t, key, id) {
		t.Errorf("shared memory segment %d (key %d) still exists after Kill", id, key)
	}
	checkRefused(t, pg.Addr())
	if err := pg.Pause(); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Pause after Kill: %v, want ErrNotRunning", err)
	}
	if err := pg.Kill(); err != nil {
		t.Errorf("second Kill: %v", err)
	}

	if err := pg.Restart(); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if pg.Port() != port {
		t.Errorf("port changed from %d to %d", port, pg.Port())
	}
	if pg.PID() == 0 || pg.PID() == oldPID {
		t.Errorf("PID() = %d after Restart, was %d", pg.PID(), oldPID)
	}
	conn = pgConnect(t, pg)
	if got := pgOwners(t, conn); got != "a=x" {
		t.Errorf("after Kill and Restart: %q, want the committed row only, %q", got, "a=x")
	}
	if _, err := conn.Exec(ctx(t, queryTimeout), `INSERT INTO locks VALUES ('c', 'z')`); err != nil {
		t.Fatal(err)
	}

	// A clean stop keeps the data too.
	procs = processes(t, pg.PID())
	if err := pg.Shutdown(); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	checkGone(t, "after Shutdown", procs)
	checkRefused(t, pg.Addr())
	if err := pg.Restart(); err != nil {
		t.Fatalf("Restart after Shutdown: %v", err)
	}
	if got := pgOwners(t, pgConnect(t, pg)); got != "a=x,c=z" {
		t.Errorf("after Shutdown and Restart: %q, want %q", got, "a=x,c=z")
	}

	if err := pg.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := pg.Restart(); !errors.Is(err, ErrStopped) {
		t.Errorf("Restart after Stop: %v, want ErrStopped", err)
	}
}

func TestPostgresPause(t *testing.T) {
	pg := StartPostgres(t)
	conn := pgConnect(t, pg)
	if _, err := conn.Exec(ctx(t, queryTimeout), `SELECT 1`); err != nil {
		t.Fatal(err)
	}
	if err := pg.Pause(); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	checkStopped(t, "paused", processes(t, pg.PID()))

	// The open connection's backend does not answer.
	start := time.Now()
	_, err := conn.Exec(ctx(t, pausedTimeout), `SELECT 1`)
	if err == nil {
		t.Fatal("query on an open connection to a paused server succeeded")
	}
	if took := time.Since(start); took < pausedTimeout*9/10 {
		t.Errorf("query on a paused server failed after %v, before its deadline: %v", took, err)
	}
	// Nor does the postmaster, to a new connection.
	start = time.Now()
	if c2, err := pgx.Connect(ctx(t, pausedTimeout), pg.DSN()); err == nil {
		c2.Close(ctx(t, time.Second))
		t.Fatal("connected to a paused server")
	} else if took := time.Since(start); took < pausedTimeout*9/10 {
		t.Errorf("connection to a paused server failed after %v, before its deadline: %v", took, err)
	}

	if err := pg.Resume(); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	var one int
	if err := pgConnect(t, pg).QueryRow(ctx(t, queryTimeout), `SELECT 1`).Scan(&one); err != nil || one != 1 {
		t.Fatalf("after Resume: SELECT 1 = %d, %v", one, err)
	}
}

func TestPostgresStartError(t *testing.T) {
	tmp := privateTempDir(t)
	pg, err := NewPostgres(WithArgs("-c", "no_such_setting=1"))
	if err == nil {
		pg.Stop()
		t.Fatal("NewPostgres with a bad setting succeeded")
	}
	for _, want := range []string{"--- end of postgres output", `unrecognized configuration parameter "no_such_setting"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not contain %q:\n%v", want, err)
		}
	}
	checkEmpty(t, tmp)
}
