//go:build linux

package sqltest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
)

func TestSideBySide(t *testing.T) {
	// Two servers of each kind, started at once.
	var (
		wg   sync.WaitGroup
		pgs  [2]*Postgres
		mdbs [2]*MariaDB
		errs [4]error
	)
	for i := range 2 {
		wg.Go(func() { pgs[i], errs[i] = NewPostgres() })
		wg.Go(func() { mdbs[i], errs[2+i] = NewMariaDB() })
	}
	wg.Wait()
	for i := range 2 {
		if pgs[i] != nil {
			t.Cleanup(func() {
				if err := pgs[i].Stop(); err != nil {
					t.Error(err)
				}
			})
		}
		if mdbs[i] != nil {
			t.Cleanup(func() {
				if err := mdbs[i].Stop(); err != nil {
					t.Error(err)
				}
			})
		}
	}
	if err := errors.Join(errs[:]...); err != nil {
		t.Fatal(err)
	}

	ports := map[int]string{}
	for i, pg := range pgs {
		name := fmt.Sprintf("postgres %d", i)
		if other, dup := ports[pg.Port()]; dup {
			t.Errorf("%s and %s both have port %d", name, other, pg.Port())
		}
		ports[pg.Port()] = name
		conn := pgConnect(t, pg)
		c := ctx(t, queryTimeout)
		if _, err := conn.Exec(c, `CREATE TABLE locks (name text PRIMARY KEY, owner text NOT NULL)`); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := conn.Exec(c, `INSERT INTO locks VALUES ('which', $1)`, name); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	for i, m := range mdbs {
		name := fmt.Sprintf("mariadb %d", i)
		if other, dup := ports[m.Port()]; dup {
			t.Errorf("%s and %s both have port %d", name, other, m.Port())
		}
		ports[m.Port()] = name
		db := mdbOpen(t, m)
		c := ctx(t, queryTimeout)
		if _, err := db.ExecContext(c, `CREATE TABLE locks (name VARCHAR(64) PRIMARY KEY, owner TEXT NOT NULL)`); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := db.ExecContext(c, `INSERT INTO locks VALUES ('which', ?)`, name); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	// Each server has only its own row.
	for i, pg := range pgs {
		name := fmt.Sprintf("postgres %d", i)
		if got := pgOwners(t, pgConnect(t, pg)); got != "which="+name {
			t.Errorf("%s has %q, want %q", name, got, "which="+name)
		}
	}
	for i, m := range mdbs {
		name := fmt.Sprintf("mariadb %d", i)
		if got := mdbOwners(t, mdbOpen(t, m)); got != "which="+name {
			t.Errorf("%s has %q, want %q", name, got, "which="+name)
		}
	}
}

func TestNothingLeftBehind(t *testing.T) {
	var (
		procs    = map[string][]procInfo{}
		dirs     []string
		shmKey   int
		shmID    int
		pgPort   int
		mdbPort  int
		killedPG int
	)
	t.Run("servers", func(t *testing.T) {
		// Stopped while paused: Stop must resume it to shut it down.
		pg := StartPostgres(t)
		pgPort = pg.Port()
		procs["paused postgres"] = processes(t, pg.PID())
		shmKey, shmID = pgShm(t, pg)
		// Killed, then stopped: nothing runs, the directory remains.
		killed := StartPostgres(t)
		killedPG = killed.Port()
		procs["killed postgres"] = processes(t, killed.PID())
		m := StartMariaDB(t)
		mdbPort = m.Port()
		procs["paused mariadb"] = processes(t, m.PID())
		dirs = []string{pg.Dir(), killed.Dir(), m.Dir()}

		if err := killed.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := pg.Pause(); err != nil {
			t.Fatal(err)
		}
		if err := m.Pause(); err != nil {
			t.Fatal(err)
		}
	})
	for what, ps := range procs {
		checkGone(t, what, ps)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("directory %s: %v, want it removed", d, err)
		}
	}
	if shmExists(t, shmKey, shmID) {
		t.Errorf("shared memory segment %d (key %d) of the stopped postgres still exists", shmID, shmKey)
	}
	// The ports are free again (none is held for a restart).
	for _, port := range []int{pgPort, killedPG, mdbPort} {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			t.Errorf("port %d not free after Stop: %v", port, err)
			continue
		}
		l.Close()
	}
}

// takenPortFirst returns an Option whose port picker first returns a port
// that a listener holds, then free ports, and the number of picks so far.
func takenPortFirst(t *testing.T) (Option, int, *int) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	taken := l.Addr().(*net.TCPAddr).Port
	picks := 0
	opt := func(c *config) {
		c.pickPort = func() (int, error) {
			picks++
			if picks == 1 {
				return taken, nil
			}
			return freePort()
		}
	}
	return opt, taken, &picks
}

func TestPortTaken(t *testing.T) {
	opt, taken, picks := takenPortFirst(t)
	pg := StartPostgres(t, opt)
	if pg.Port() == taken || *picks != 2 {
		t.Errorf("postgres: port %d after %d picks; port %d was taken", pg.Port(), *picks, taken)
	}
	opt, taken, picks = takenPortFirst(t)
	m := StartMariaDB(t, opt)
	if m.Port() == taken || *picks != 2 {
		t.Errorf("mariadb: port %d after %d picks; port %d was taken", m.Port(), *picks, taken)
	}
}

func TestNotFound(t *testing.T) {
	t.Setenv(EnvPostgresBinDir, t.TempDir())
	t.Setenv(EnvMariaDBD, "/nonexistent/mariadbd")
	if _, err := NewPostgres(); !errors.Is(err, ErrNotFound) {
		t.Errorf("NewPostgres with %s set to an empty directory: %v, want ErrNotFound", EnvPostgresBinDir, err)
	}
	if _, err := NewMariaDB(); !errors.Is(err, ErrNotFound) {
		t.Errorf("NewMariaDB with %s set to a missing file: %v, want ErrNotFound", EnvMariaDBD, err)
	}
}
