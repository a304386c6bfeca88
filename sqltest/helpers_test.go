//go:build linux

package sqltest

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"
)

// queryTimeout bounds the queries of the tests that are expected to
// succeed.
const queryTimeout = 10 * time.Second

// pausedTimeout is the deadline of the queries sent to a paused server,
// which must fail.
const pausedTimeout = time.Second

func ctx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return c
}

// pgConnect opens a connection to pg that the test closes at its end.
func pgConnect(t *testing.T, pg *Postgres) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx(t, queryTimeout), pg.DSN())
	if err != nil {
		t.Fatalf("connect to postgres: %v", err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(c)
	})
	return conn
}

// mdbOpen returns a database handle for m that the test closes at its end.
func mdbOpen(t *testing.T, m *MariaDB) *sql.DB {
	t.Helper()
	cfg, err := mysql.ParseDSN(m.DSN())
	if err != nil {
		t.Fatalf("parse DSN %q: %v", m.DSN(), err)
	}
	cfg.Logger = &mysql.NopLogger{} // the killed and paused servers' errors are expected
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// processes returns what /proc says of pid and its children.
func processes(t *testing.T, pid int) []procInfo {
	t.Helper()
	self, err := readStat(pid)
	if err != nil {
		t.Fatalf("pid %d: %v", pid, err)
	}
	kids, err := children(pid)
	if err != nil {
		t.Fatalf("children of pid %d: %v", pid, err)
	}
	return append([]procInfo{self}, kids...)
}

// running reports whether the process pi still runs: it exists, has the
// same start time and is not a zombie.
func running(pi procInfo) bool {
	cur, err := readStat(pi.pid)
	return err == nil && cur.start == pi.start && cur.state != 'Z' && cur.state != 'X'
}

// checkGone fails the test if a process of ps still runs.
func checkGone(t *testing.T, what string, ps []procInfo) {
	t.Helper()
	for _, pi := range ps {
		if running(pi) {
			cur, _ := readStat(pi.pid)
			t.Errorf("%s: pid %d still runs (state %c)", what, pi.pid, cur.state)
		}
	}
}

// checkStopped fails the test if a process of ps still runs, rather than
// being stopped by a signal (or dead: a backend that was exiting when the
// server was paused).
func checkStopped(t *testing.T, what string, ps []procInfo) {
	t.Helper()
	for _, pi := range ps {
		cur, err := readStat(pi.pid)
		if err == nil && cur.start == pi.start && !strings.ContainsRune("TtZX", rune(cur.state)) {
			t.Errorf("%s: pid %d has state %c, want T (stopped)", what, pi.pid, cur.state)
		}
	}
}

// processUID returns the real user id that pid runs as.
func processUID(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Uid:"); ok {
			uid, err := strconv.Atoi(strings.Fields(v)[0])
			if err != nil {
				t.Fatal(err)
			}
			return uid
		}
	}
	t.Fatalf("no Uid in /proc/%d/status", pid)
	return 0
}

// pgShm returns the key and id of the System V shared memory segment of
// the running postmaster of pg, from its postmaster.pid.
func pgShm(t *testing.T, pg *Postgres) (key, id int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(pg.dataDir, "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 7 {
		t.Fatalf("postmaster.pid has %d lines:\n%s", len(lines), b)
	}
	f := strings.Fields(lines[6])
	if len(f) != 2 {
		t.Fatalf("postmaster.pid line 7 is %q", lines[6])
	}
	k, err1 := strconv.ParseUint(f[0], 10, 64)
	id, err2 := strconv.Atoi(f[1])
	if err := errors.Join(err1, err2); err != nil {
		t.Fatalf("postmaster.pid line 7 %q: %v", lines[6], err)
	}
	return int(int32(uint32(k))), id
}

// shmExists reports whether the System V shared memory segment id exists
// with the key key.
func shmExists(t *testing.T, key, id int) bool {
	t.Helper()
	var desc unix.SysvShmDesc
	_, err := unix.SysvShmCtl(id, unix.IPC_STAT, &desc)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EIDRM) {
		return false
	}
	if err != nil {
		t.Fatalf("shmctl(%d, IPC_STAT): %v", id, err)
	}
	return int(desc.Perm.Key) == key
}

// checkRefused fails the test unless a connection to addr is refused, as
// to a dead server whose port is held.
func checkRefused(t *testing.T, addr string) {
	t.Helper()
	var d net.Dialer
	conn, err := d.DialContext(ctx(t, queryTimeout), "tcp", addr)
	if err == nil {
		conn.Close()
		t.Errorf("dial %s: connected, want connection refused", addr)
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial %s: %v, want connection refused", addr, err)
	}
}

// privateTempDir points the package's temporary directories, for the
// rest of the test, to a new directory that the test removes at its end,
// and returns it. It can be entered by every user, as the servers'
// directories need when the test runs as root.
func privateTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sqltest-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", dir)
	return dir
}

// checkEmpty fails the test unless the directory dir is empty.
func checkEmpty(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("left behind in %s: %s", dir, e.Name())
	}
}
