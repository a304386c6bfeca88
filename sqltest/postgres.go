package sqltest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
)

const (
	// PostgresUser is the superuser of every PostgreSQL server this
	// package starts. It has no password: the servers trust every
	// connection.
	PostgresUser = "postgres"
	// Database is the name of the empty database that each server (of
	// either kind) has for the tests, and that [Postgres.DSN] and
	// [MariaDB.DSN] name.
	Database = "test"
)

// A Postgres is a PostgreSQL server (a postmaster and its backends)
// started by this package, listening on 127.0.0.1 at a port that stays the
// same for its lifetime and on a Unix socket in its own temporary
// directory, which also holds its data directory and its log. It has a
// superuser [PostgresUser] and a database [Database], and trusts every
// connection.
//
// It runs with fsync=off and full_page_writes=off: its data survives the
// crash of the server ([Postgres.Kill]), not of the machine. Commits are
// synchronous (synchronous_commit=on, a write to the kernel without
// fsync), so that a committed transaction survives Kill.
//
// When the test runs as root, the server runs as the postgres system user,
// since PostgreSQL refuses to run as root; its directory is given to that
// user, and must be reachable by it (the default temporary directory,
// /tmp, is).
//
// A Postgres may also be a streaming replica of another
// ([Postgres.NewReplica]), read-only until [Postgres.Promote].
//
// A Postgres is safe for concurrent use by multiple goroutines. Its methods
// only ever signal the processes this package started for it.
type Postgres struct {
	s       server
	dataDir string

	// of is what a replica ([Postgres.NewReplica]) replicates; nil for
	// a server started by NewPostgres.
	of *replicaOf
	// syncs holds the application names of the synchronous replicas of
	// this server, in the order they were made.
	syncs struct {
		mu    sync.Mutex
		names []string
	}
}

// NewPostgres starts a PostgreSQL server and returns once it accepts
// connections and answers a query. It is meant for code that is not a
// test, such as demos and benchmarks; the caller must call
// [Postgres.Stop] to end it and remove its directory. Tests should use
// [StartPostgres] instead.
//
// The first server of a test binary runs initdb into a template that the
// later ones copy, so it takes a second or two longer. The server listens
// on a free port of 127.0.0.1 and is started with
//
//	postgres -D DIR/data -p PORT -h 127.0.0.1 -k DIR
//	  -c fsync=off -c synchronous_commit=on -c full_page_writes=off
//	  -c max_connections=100 -c shared_buffers=32MB -c huge_pages=off
//	  -c dynamic_shared_memory_type=mmap
//
// followed by any arguments from [WithArgs]. If the port turns out to be
// taken, NewPostgres retries with other ports. If the server does not
// start, the error includes the end of its output, and nothing is left
// behind. If PostgreSQL cannot be found, the error wraps [ErrNotFound].
func NewPostgres(opts ...Option) (*Postgres, error) {
	binDir, err := postgresBinDir()
	if err != nil {
		return nil, err
	}
	as, err := serverAccount()
	if err != nil {
		return nil, fmt.Errorf("sqltest: postgres: %w", err)
	}
	tmpl, err := postgresTemplate(binDir, as)
	if err != nil {
		return nil, fmt.Errorf("sqltest: postgres: %w", err)
	}
	cfg := newConfig(opts)
	if err := cfg.notReplica("postgres"); err != nil {
		return nil, err
	}
	pg, err := newPostgres(binDir, as, cfg)
	if err != nil {
		return nil, err
	}
	err = pg.s.launch(
		func() error { return as.chown(pg.s.dir) },
		func() error { return tmpl.write(pg.dataDir, as) },
	)
	if err != nil {
		return nil, err
	}
	return pg, nil
}

// newPostgres makes the Postgres of a new server, with its directory,
// before anything is in it.
func newPostgres(binDir string, as *account, cfg config) (*Postgres, error) {
	pg := &Postgres{}
	pg.s.cfg = cfg
	if err := pg.s.makeDir("postgres", "postgres.log"); err != nil {
		return nil, err
	}
	pg.dataDir = filepath.Join(pg.s.dir, "data")
	pg.s.flavor = flavor{
		kind:     "postgres",
		bin:      filepath.Join(binDir, "postgres"),
		args:     pg.args,
		env:      serverEnv([]string{"PG"}),
		as:       as,
		probe:    pg.probe,
		shutdown: sigInt, // "fast" shutdown: clients are disconnected
		clean:    pg.clean,
	}
	return pg, nil
}

// StartPostgres starts a PostgreSQL server for the test or benchmark tb,
// as [NewPostgres] does, and registers a cleanup function with tb that
// stops it. If the server cannot be started (including when PostgreSQL is
// not installed, in which case the message says how to install it),
// StartPostgres calls tb.Fatal.
func StartPostgres(tb TB, opts ...Option) *Postgres {
	tb.Helper()
	pg, err := NewPostgres(opts...)
	return stopAtCleanup(tb, pg, err)
}

// args returns the postgres command line for port.
func (pg *Postgres) args(port int) []string {
	args := []string{
		"-D", pg.dataDir,
		"-p", strconv.Itoa(port),
		"-h", "127.0.0.1",
		"-k", pg.s.dir,
		"-c", "fsync=off",
		"-c", "synchronous_commit=on",
		"-c", "full_page_writes=off",
		"-c", "max_connections=100",
		"-c", "shared_buffers=32MB",
		"-c", "huge_pages=off",
		// Dynamic shared memory in files of the data directory (removed
		// with it) rather than in /dev/shm, where a killed server would
		// leave them.
		"-c", "dynamic_shared_memory_type=mmap",
	}
	if pg.of != nil {
		args = append(args, "-c", "wal_retrieve_retry_interval="+replicaRetry)
	}
	return append(args, pg.s.cfg.args...)
}

// DSN returns a postgres:// URL for the database [Database] on the
// server, as the superuser [PostgresUser], over TCP to 127.0.0.1 without
// TLS: "postgres://postgres@127.0.0.1:PORT/test?sslmode=disable", in the
// form accepted by pgx and lib/pq. It does not change when the server is
// restarted.
func (pg *Postgres) DSN() string { return postgresDSN(pg.s.port) }

func postgresDSN(port int) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(PostgresUser),
		Host:     "127.0.0.1:" + strconv.Itoa(port),
		Path:     "/" + Database,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Addr returns the server's address, "127.0.0.1:PORT". It does not change
// when the server is restarted.
func (pg *Postgres) Addr() string { return pg.s.addr() }

// Port returns the server's TCP port. It does not change when the server
// is restarted.
func (pg *Postgres) Port() int { return pg.s.port }

// PID returns the process id of the running postmaster, which changes
// after [Postgres.Restart], or 0 if no postmaster is running.
func (pg *Postgres) PID() int { return pg.s.pid() }

// Dir returns the server's directory, a temporary directory that
// [Postgres.Stop] removes. It holds the data directory (Dir()/data), the
// log ([Postgres.LogPath]) and the Unix socket (Dir()/.s.PGSQL.PORT).
func (pg *Postgres) Dir() string { return pg.s.dir }

// LogPath returns the path of the server's log, inside [Postgres.Dir]:
// everything the postmaster and its backends write to stdout and stderr.
func (pg *Postgres) LogPath() string { return pg.s.logPath }

// Kill sends SIGKILL to the postmaster and its backends, simulating a
// crash, and returns once they have all exited. Clients then get
// connection errors until [Postgres.Restart], which recovers the committed
// data from the write-ahead log: the port stays reserved meanwhile (on
// Unix), so that no other server started on a free port answers them.
// Kill does nothing if no server process is running.
func (pg *Postgres) Kill() error { return pg.s.kill() }

// Pause sends SIGSTOP to the postmaster, then to its backends, and returns
// once they are all stopped: the server is frozen. Connections are still
// accepted by the kernel, but nothing answers on them, nor on the open
// ones, until [Postgres.Resume], so clients time out. (On systems without
// /proc, only the postmaster is stopped.) Pausing a paused server does
// nothing. Pause returns [ErrNotRunning] if no server process is running.
func (pg *Postgres) Pause() error { return pg.s.pause() }

// Resume sends SIGCONT to the backends and the postmaster, undoing
// [Postgres.Pause]; requests sent while the server was paused are then
// served. Resuming a server that is not paused does nothing. Resume
// returns [ErrNotRunning] if no server process is running.
func (pg *Postgres) Resume() error { return pg.s.resume() }

// Shutdown shuts the server down cleanly, as "pg_ctl stop -m fast" does
// (SIGINT: clients are disconnected, a checkpoint is written), resuming
// it first if it is paused, and returns once the postmaster has exited;
// if it has not after 10 seconds, it is killed. The data directory is kept
// and the port reserved (on Unix) until [Postgres.Restart]. Shutdown does
// nothing if no server process is running.
func (pg *Postgres) Shutdown() error { return pg.s.shutdownServer() }

// Restart kills the server if it is running (as [Postgres.Kill] does),
// starts a new postmaster on the same port from the same data directory,
// and returns once it accepts connections and answers a query: committed
// data is kept, and after a kill PostgreSQL's crash recovery runs first.
// The new postmaster has a new pid. Restart works after Kill, Shutdown and
// Pause and after a failed Restart, but returns [ErrStopped] after
// [Postgres.Stop]. If the new postmaster does not start, the error
// includes the end of its output and no process is left running.
func (pg *Postgres) Restart() error { return pg.s.restart() }

// Stop ends the server for good and removes its directory. A running
// server is shut down as by [Postgres.Shutdown], and killed if it has not
// exited after 10 seconds. Stop is idempotent: calls after the first do
// nothing and return nil. After Stop, [Postgres.Restart] returns
// [ErrStopped]. A synchronous replica ([WithSynchronousReplication]) is
// first taken out of its primary's synchronous_standby_names, so that the
// primary's commits stop waiting for it: at once if the primary is
// running (by ALTER SYSTEM and a reload), otherwise in its
// postgresql.auto.conf, in force when it next starts (a paused primary
// keeps waiting until then).
func (pg *Postgres) Stop() error {
	if pg.of == nil {
		return pg.s.stop()
	}
	return pg.stopReplica()
}

// probe connects to the server on port, runs a query, and checks that the
// server that answers is this one, by its data directory.
func (pg *Postgres) probe(ctx context.Context, port int) error {
	conn, err := pgx.Connect(ctx, postgresDSN(port))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var one int
	var dataDir string
	if err := conn.QueryRow(ctx, "SELECT 1, current_setting('data_directory')").Scan(&one, &dataDir); err != nil {
		return err
	}
	if one != 1 {
		return fmt.Errorf("SELECT 1 returned %d", one)
	}
	if dataDir != pg.dataDir {
		return fmt.Errorf("%w: 127.0.0.1:%d is served by the PostgreSQL of %s", errPortInUse, port, dataDir)
	}
	return nil
}

// clean removes what a killed postmaster leaves behind, once none of its
// processes runs: its System V shared memory segment (see removeShm) and
// its lock files, so that a new postmaster does not take a pid now used
// by another process for the old one. It is also called after a clean
// shutdown, when there is nothing left to remove.
func (pg *Postgres) clean() error {
	lock := filepath.Join(pg.dataDir, "postmaster.pid")
	var errs []error
	if b, err := os.ReadFile(lock); err == nil {
		// Line 7 of postmaster.pid: "KEY ID" of the shared memory.
		lines := strings.Split(string(b), "\n")
		if len(lines) >= 7 {
			if f := strings.Fields(lines[6]); len(f) == 2 {
				key, err1 := strconv.ParseUint(f[0], 10, 64)
				id, err2 := strconv.Atoi(f[1])
				if err1 == nil && err2 == nil {
					errs = append(errs, removeShm(int(int32(uint32(key))), id))
				}
			}
		}
	}
	sock := filepath.Join(pg.s.dir, ".s.PGSQL."+strconv.Itoa(pg.s.port))
	for _, f := range []string{lock, sock, sock + ".lock"} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// pgTemplate is the data directory that initdb made for the first server
// of the test binary, with the database test added.
var pgTemplate struct {
	once sync.Once
	t    *template
	err  error
}

// postgresTemplate returns the template data directory, made on the first
// call with the binaries of binDir, as the account as.
func postgresTemplate(binDir string, as *account) (*template, error) {
	pgTemplate.once.Do(func() {
		pgTemplate.t, pgTemplate.err = initPostgres(binDir, as)
	})
	return pgTemplate.t, pgTemplate.err
}

// initPostgres runs initdb in a temporary directory, creates the database
// test in single-user mode, resets the write-ahead log, reads the data
// directory into a template and removes the temporary directory.
func initPostgres(binDir string, as *account) (*template, error) {
	dir, err := os.MkdirTemp("", "sqltest-initdb-")
	if err != nil {
		return nil, fmt.Errorf("initdb: %w", err)
	}
	defer os.RemoveAll(dir)
	if err := as.chown(dir); err != nil {
		return nil, fmt.Errorf("initdb: %w", err)
	}
	data := filepath.Join(dir, "data")
	env := serverEnv([]string{"PG"})
	if _, err := runTool(filepath.Join(binDir, "initdb"), dir, env, as, "",
		"-D", data, "-U", PostgresUser, "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync",
	); err != nil {
		return nil, err
	}
	out, err := runTool(filepath.Join(binDir, "postgres"), dir, env, as, "CREATE DATABASE "+Database+";\n",
		"--single", "-D", data, "-c", "fsync=off", "postgres",
	)
	if err == nil && (strings.Contains(out, "ERROR:") || strings.Contains(out, "FATAL:")) {
		err = fmt.Errorf("postgres --single: CREATE DATABASE failed\n--- output ---\n%s", out)
	}
	if err != nil {
		return nil, err
	}
	// Drop the write-ahead log, a quarter of the directory (CREATE
	// DATABASE logs every page it copies): safe after the clean shutdown
	// that ends single-user mode, and less to write for each server.
	if resetwal := filepath.Join(binDir, "pg_resetwal"); isExecutable(resetwal) {
		if _, err := runTool(resetwal, dir, env, as, "", "-D", data); err != nil {
			return nil, err
		}
	}
	return readTemplate(data)
}
