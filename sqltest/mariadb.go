package sqltest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/go-sql-driver/mysql"
)

// MariaDBUser is the user of every MariaDB server this package starts
// that [MariaDB.DSN] names: root, with all privileges and no password,
// from 127.0.0.1 (and localhost, over the Unix socket).
const MariaDBUser = "root"

// A MariaDB is a MariaDB server (one mariadbd process) started by this
// package, listening on 127.0.0.1 at a port that stays the same for its
// lifetime and on a Unix socket in its own temporary directory, which also
// holds its data directory and its log. It has a database [Database]
// (utf8mb4), and a user [MariaDBUser] with no password; the grant tables
// are in force (it does not run with --skip-grant-tables), so users and
// grants work as in production.
//
// InnoDB writes its log to the kernel at each commit without fsync
// (innodb_flush_log_at_trx_commit=2) and has no doublewrite buffer: its
// data survives the crash of the server ([MariaDB.Kill]), not of the
// machine.
//
// When the test runs as root, mariadbd runs as root too (--user=root).
//
// A MariaDB is safe for concurrent use by multiple goroutines. Its methods
// only ever signal the process this package started for it.
type MariaDB struct {
	s       server
	dataDir string
	socket  string
	pidFile string
}

// NewMariaDB starts a MariaDB server and returns once it accepts
// connections and answers a query. It is meant for code that is not a
// test, such as demos and benchmarks; the caller must call [MariaDB.Stop]
// to end it and remove its directory. Tests should use [StartMariaDB]
// instead.
//
// The first server of a test binary runs mariadb-install-db into a
// template that the later ones copy, so it takes a second or two longer.
// The server listens on a free port of 127.0.0.1 and is started with
//
//	mariadbd --no-defaults --datadir=DIR/data --port=PORT
//	  --bind-address=127.0.0.1 --socket=DIR/mariadb.sock
//	  --pid-file=DIR/mariadbd.pid --tmpdir=DIR --skip-name-resolve
//	  --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci
//	  --max-connections=100 --innodb-flush-log-at-trx-commit=2
//	  --innodb-doublewrite=0 --innodb-buffer-pool-size=32M
//	  --innodb-buffer-pool-load-at-startup=0
//	  --innodb-buffer-pool-dump-at-shutdown=0
//	  --innodb-temp-data-file-path=ibtmp1:1M:autoextend
//
// (and --user=root when the test runs as root), followed by any arguments
// from [WithArgs]. If the port turns out to be taken, NewMariaDB retries
// with other ports. If the server does not start, the error includes the
// end of its output, and nothing is left behind. If MariaDB cannot be
// found, the error wraps [ErrNotFound].
func NewMariaDB(opts ...Option) (*MariaDB, error) {
	bin, install, err := mariadbBinaries()
	if err != nil {
		return nil, err
	}
	tmpl, err := mariadbTemplate(bin, install)
	if err != nil {
		return nil, fmt.Errorf("sqltest: mariadb: %w", err)
	}
	m := &MariaDB{}
	m.s.cfg = newConfig(opts)
	if err := m.s.cfg.notReplica("mariadb"); err != nil {
		return nil, err
	}
	if err := m.s.makeDir("mariadb", "mariadbd.log"); err != nil {
		return nil, err
	}
	m.dataDir = filepath.Join(m.s.dir, "data")
	m.socket = filepath.Join(m.s.dir, "mariadb.sock")
	m.pidFile = filepath.Join(m.s.dir, "mariadbd.pid")
	m.s.flavor = flavor{
		kind:     "mariadb",
		bin:      bin,
		args:     m.args,
		env:      serverEnv(mariadbEnvPrefixes),
		probe:    m.probe,
		shutdown: sigTerm,
		clean:    m.clean,
	}
	if err := m.s.launch(func() error { return tmpl.write(m.dataDir, nil) }); err != nil {
		return nil, err
	}
	return m, nil
}

// StartMariaDB starts a MariaDB server for the test or benchmark tb, as
// [NewMariaDB] does, and registers a cleanup function with tb that stops
// it. If the server cannot be started (including when MariaDB is not
// installed, in which case the message says how to install it),
// StartMariaDB calls tb.Fatal.
func StartMariaDB(tb TB, opts ...Option) *MariaDB {
	tb.Helper()
	m, err := NewMariaDB(opts...)
	return stopAtCleanup(tb, m, err)
}

// mariadbEnvPrefixes are the environment variables that mariadbd and
// mariadb-install-db must not see: MYSQL_TCP_PORT, MYSQL_UNIX_PORT,
// MYSQL_HOME, MARIADB_HOME and the like.
var mariadbEnvPrefixes = []string{"MYSQL_", "MARIADB_"}

// args returns the mariadbd command line for port.
func (m *MariaDB) args(port int) []string {
	args := []string{
		"--no-defaults", // must come first
		"--datadir=" + m.dataDir,
		"--port=" + strconv.Itoa(port),
		"--bind-address=127.0.0.1",
		"--socket=" + m.socket,
		"--pid-file=" + m.pidFile,
		"--tmpdir=" + m.s.dir,
	}
	args = append(args, mariadbSettings...)
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	return append(args, m.s.cfg.args...)
}

// mariadbSettings are the settings of every mariadbd this package runs,
// mariadb-install-db's included.
var mariadbSettings = []string{
	"--skip-name-resolve",
	"--character-set-server=utf8mb4",
	"--collation-server=utf8mb4_general_ci",
	"--max-connections=100",
	"--innodb-flush-log-at-trx-commit=2",
	"--innodb-doublewrite=0",
	"--innodb-buffer-pool-size=32M",
	"--innodb-buffer-pool-load-at-startup=0",
	"--innodb-buffer-pool-dump-at-shutdown=0",
	// Not the default 12 MB, written in full at every start.
	"--innodb-temp-data-file-path=ibtmp1:1M:autoextend",
}

// DSN returns the data source name of the database [Database] on the
// server, as [MariaDBUser] over TCP to 127.0.0.1, in the form of
// github.com/go-sql-driver/mysql: "root@tcp(127.0.0.1:PORT)/test?parseTime=true".
// It does not change when the server is restarted.
func (m *MariaDB) DSN() string { return mariadbConfig(m.s.port).FormatDSN() }

// mariadbConfig returns the driver configuration that DSN formats.
func mariadbConfig(port int) *mysql.Config {
	cfg := mysql.NewConfig()
	cfg.User = MariaDBUser
	cfg.Net = "tcp"
	cfg.Addr = "127.0.0.1:" + strconv.Itoa(port)
	cfg.DBName = Database
	cfg.ParseTime = true
	return cfg
}

// URL returns a mysql:// URL for the database [Database] on the server, as
// [MariaDBUser]: "mysql://root@127.0.0.1:PORT/test", for clients that take
// URLs (such as migration tools). It does not change when the server is
// restarted.
func (m *MariaDB) URL() string {
	return "mysql://" + MariaDBUser + "@" + m.s.addr() + "/" + Database
}

// Addr returns the server's address, "127.0.0.1:PORT". It does not change
// when the server is restarted.
func (m *MariaDB) Addr() string { return m.s.addr() }

// Port returns the server's TCP port. It does not change when the server
// is restarted.
func (m *MariaDB) Port() int { return m.s.port }

// Socket returns the path of the server's Unix socket, inside
// [MariaDB.Dir].
func (m *MariaDB) Socket() string { return m.socket }

// PID returns the process id of the running mariadbd, which changes after
// [MariaDB.Restart], or 0 if none is running.
func (m *MariaDB) PID() int { return m.s.pid() }

// Dir returns the server's directory, a temporary directory that
// [MariaDB.Stop] removes. It holds the data directory (Dir()/data), the
// log ([MariaDB.LogPath]) and the Unix socket ([MariaDB.Socket]).
func (m *MariaDB) Dir() string { return m.s.dir }

// LogPath returns the path of the server's log, inside [MariaDB.Dir]:
// what mariadbd writes to stdout and stderr, its error log included.
func (m *MariaDB) LogPath() string { return m.s.logPath }

// Kill sends SIGKILL to mariadbd, simulating a crash, and returns once
// it has exited. Clients then get connection errors until
// [MariaDB.Restart], which recovers the committed data from InnoDB's
// log: the port stays reserved meanwhile (on Unix), so that no other
// server started on a free port answers them. Kill does nothing if no
// server process is running.
func (m *MariaDB) Kill() error { return m.s.kill() }

// Pause sends SIGSTOP to mariadbd, freezing it: connections are still
// accepted by the kernel, but nothing answers on them, nor on the open
// ones, until [MariaDB.Resume], so clients time out. Pausing a paused
// server does nothing. Pause returns [ErrNotRunning] if no server process
// is running.
func (m *MariaDB) Pause() error { return m.s.pause() }

// Resume sends SIGCONT to mariadbd, undoing [MariaDB.Pause]; requests
// sent while it was paused are then served. Resuming a server that is not
// paused does nothing. Resume returns [ErrNotRunning] if no server process
// is running.
func (m *MariaDB) Resume() error { return m.s.resume() }

// Shutdown shuts the server down cleanly (SIGTERM), resuming it first if
// it is paused, and returns once mariadbd has exited; if it has not after
// 10 seconds, it is killed. The data directory is kept and the port
// reserved (on Unix) until [MariaDB.Restart]. Shutdown does nothing if no
// server process is running.
func (m *MariaDB) Shutdown() error { return m.s.shutdownServer() }

// Restart kills the server if it is running (as [MariaDB.Kill] does),
// starts a new mariadbd on the same port from the same data directory, and
// returns once it accepts connections and answers a query: committed data
// is kept, and after a kill InnoDB's crash recovery runs first. The new
// process has a new pid. Restart works after Kill, Shutdown and Pause and
// after a failed Restart, but returns [ErrStopped] after [MariaDB.Stop].
// If the new process does not start, the error includes the end of its
// output and no process is left running.
func (m *MariaDB) Restart() error { return m.s.restart() }

// Stop ends the server for good and removes its directory. A running
// server is shut down as by [MariaDB.Shutdown], and killed if it has not
// exited after 10 seconds. Stop is idempotent: calls after the first do
// nothing and return nil. After Stop, [MariaDB.Restart] returns
// [ErrStopped].
func (m *MariaDB) Stop() error { return m.s.stop() }

// probe connects to the server on port, runs a query, and checks that the
// server that answers is this one, by its data directory.
func (m *MariaDB) probe(ctx context.Context, port int) error {
	cfg := mariadbConfig(port)
	cfg.Timeout = probeTimeout
	cfg.Logger = &mysql.NopLogger{} // not "[mysql] ... unexpected EOF" on stderr
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return err
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	var one int
	var dataDir string
	if err := db.QueryRowContext(ctx, "SELECT 1, @@datadir").Scan(&one, &dataDir); err != nil {
		return err
	}
	if one != 1 {
		return fmt.Errorf("SELECT 1 returned %d", one)
	}
	if filepath.Clean(dataDir) != m.dataDir {
		return fmt.Errorf("%w: 127.0.0.1:%d is served by the MariaDB of %s", errPortInUse, port, dataDir)
	}
	return nil
}

// clean removes the files a killed mariadbd leaves behind (its socket,
// the socket's lock file, which names its pid, and its pid file), so that
// a new mariadbd does not take a pid now used by another process for the
// old one. It is also called after a clean shutdown, when there is nothing
// left to remove.
func (m *MariaDB) clean() error {
	var errs []error
	for _, f := range []string{m.socket, m.socket + ".lock", m.pidFile} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// mdbTemplate is the data directory that mariadb-install-db made for the
// first server of the test binary, with the database test added.
var mdbTemplate struct {
	once sync.Once
	t    *template
	err  error
}

// mariadbTemplate returns the template data directory, made on the first
// call with the binaries bin (mariadbd) and install (mariadb-install-db).
func mariadbTemplate(bin, install string) (*template, error) {
	mdbTemplate.once.Do(func() {
		mdbTemplate.t, mdbTemplate.err = initMariaDB(bin, install)
	})
	return mdbTemplate.t, mdbTemplate.err
}

// initMariaDB runs mariadb-install-db in a temporary directory, with a
// root user that needs no password and the database test, reads the data
// directory into a template and removes the temporary directory.
func initMariaDB(bin, install string) (*template, error) {
	dir, err := os.MkdirTemp("", "sqltest-mariadb-install-")
	if err != nil {
		return nil, fmt.Errorf("mariadb-install-db: %w", err)
	}
	defer os.RemoveAll(dir)
	boot := filepath.Join(dir, "bootstrap.sql")
	sql := "CREATE DATABASE IF NOT EXISTS " + Database + " CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci;\n"
	if err := os.WriteFile(boot, []byte(sql), 0o644); err != nil {
		return nil, fmt.Errorf("mariadb-install-db: %w", err)
	}
	data := filepath.Join(dir, "data")
	args := []string{
		"--no-defaults",
		"--datadir=" + data,
		// root@localhost, root@127.0.0.1 and root@::1 with no password,
		// rather than root over the Unix socket only.
		"--auth-root-authentication-method=normal",
		"--skip-test-db", // its anonymous users and grants; test is made below
		"--extra-file=" + boot,
	}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	args = append(args, mariadbSettings...)
	// The script runs $MYSQLD_BOOTSTRAP, if set, as the server.
	env := serverEnv(mariadbEnvPrefixes, "MYSQLD_BOOTSTRAP="+bin)
	if _, err := runTool(install, dir, env, nil, "", args...); err != nil {
		return nil, err
	}
	return readTemplate(data)
}
