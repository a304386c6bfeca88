package sqltest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
)

// EnvPgBouncer is the environment variable that, when set to a non-empty
// value, names the pgbouncer binary to use instead of looking for it.
const EnvPgBouncer = "DISTLOCK_PGBOUNCER"

// PgBouncerAdminDatabase is the name of PgBouncer's admin console, the
// pseudo-database that [PgBouncer.AdminDSN] names, where SHOW POOLS, SHOW
// CONFIG and the other commands of PgBouncer's console are run.
const PgBouncerAdminDatabase = "pgbouncer"

// PgBouncerPoolSize is the default_pool_size of every PgBouncer this
// package starts, unless changed with WithArgs("default_pool_size=N"):
// at most that many server connections to the [Postgres] for each
// database and user.
const PgBouncerPoolSize = 4

// A PgBouncer is a PgBouncer connection pooler (one pgbouncer process)
// started by this package in front of a [Postgres], in transaction
// pooling mode, listening on 127.0.0.1 at a port that stays the same for
// its lifetime (and on no Unix socket), with its own temporary directory
// holding its configuration and its log. Each client connection is given
// a server connection for one transaction at a time (for one statement
// outside a transaction), so that consecutive transactions of a client
// may run on different server connections: session state (SET, advisory
// locks taken outside a transaction, prepared statements, LISTEN, temporary
// tables) does not carry over, as behind a production PgBouncer.
//
// It serves the database [Database] and, under their own names, the other
// databases of the server, to the user [PostgresUser] and any other user
// of the server, without passwords (auth_type=trust), with at most
// [PgBouncerPoolSize] server connections to each database for each user.
// [PostgresUser] may also use the admin console, [PgBouncerAdminDatabase].
//
// When the test runs as root, pgbouncer runs as the postgres system user,
// as the [Postgres] does, since it refuses to run as root.
//
// A PgBouncer is safe for concurrent use by multiple goroutines. Its
// methods only ever signal the process this package started for it; they
// never touch the [Postgres] behind it, whose own life cycle is separate:
// a killed or paused Postgres makes the PgBouncer's clients fail or wait,
// as a real one would.
type PgBouncer struct {
	s    server
	pg   *Postgres
	conf string // path of pgbouncer.ini
}

// NewPgBouncer starts a PgBouncer in front of pg and returns once it
// accepts connections and a query sent through it to pg is answered. It
// is meant for code that is not a test, such as demos and benchmarks; the
// caller must call [PgBouncer.Stop] to end it and remove its directory
// (stopping pg does not stop it). Tests should use [StartPgBouncer]
// instead.
//
// The PgBouncer listens on a free port of 127.0.0.1 and is started as
// "pgbouncer DIR/pgbouncer.ini", with the settings
//
//	[databases]
//	test = host=127.0.0.1 port=PGPORT dbname=test
//	* = host=127.0.0.1 port=PGPORT
//	[pgbouncer]
//	listen_addr = 127.0.0.1
//	listen_port = PORT
//	unix_socket_dir =
//	auth_type = trust
//	auth_file = DIR/userlist.txt
//	admin_users = postgres
//	pool_mode = transaction
//	default_pool_size = 4
//	min_pool_size = 0
//	reserve_pool_size = 0
//	max_client_conn = 100
//	server_login_retry = 0.1
//	ignore_startup_parameters = extra_float_digits, default_query_exec_mode
//
// followed by the settings given with [WithArgs], as "name=value"
// arguments (for example WithArgs("default_pool_size=1")): a later
// setting of a name overrides an earlier one. Do not change the listen
// address or port, which the package relies on. Its log (its standard
// error; no logfile is set) is DIR/pgbouncer.log.
//
// A server login that fails (pg down) is retried after 0.1 s rather than
// PgBouncer's default of 15 s, so that clients see pg again soon after
// [Postgres.Restart]. Clients that pass extra_float_digits (lib/pq, JDBC)
// are accepted, and so is default_query_exec_mode, which pgx reads from
// [PgBouncer.DSN] but lib/pq would send on to the server.
//
// If the port turns out to be taken, NewPgBouncer retries with other
// ports. If PgBouncer does not start, the error includes the end of its
// output, and nothing is left behind. If pgbouncer cannot be found, the
// error wraps [ErrNotFound].
func NewPgBouncer(pg *Postgres, opts ...Option) (*PgBouncer, error) {
	if pg == nil {
		return nil, errors.New("sqltest: pgbouncer: nil *Postgres")
	}
	bin, err := pgbouncerBinary()
	if err != nil {
		return nil, err
	}
	shutdown, err := pgbouncerShutdownSignal(bin)
	if err != nil {
		return nil, fmt.Errorf("sqltest: pgbouncer: %w", err)
	}
	as, err := serverAccount()
	if err != nil {
		return nil, fmt.Errorf("sqltest: pgbouncer: %w", err)
	}
	pb := &PgBouncer{pg: pg}
	pb.s.cfg = newConfig(opts)
	if err := pb.s.cfg.notReplica("pgbouncer"); err != nil {
		return nil, err
	}
	for _, a := range pb.s.cfg.args {
		if name, _, ok := strings.Cut(a, "="); !ok || strings.TrimSpace(name) == "" || strings.ContainsAny(a, "\n\r") {
			return nil, fmt.Errorf("sqltest: pgbouncer: setting %q is not of the form name=value", a)
		}
	}
	if err := pb.s.makeDir("pgbouncer", "pgbouncer.log"); err != nil {
		return nil, err
	}
	pb.conf = filepath.Join(pb.s.dir, "pgbouncer.ini")
	pb.s.flavor = flavor{
		kind: "pgbouncer",
		bin:  bin,
		args: func(int) []string { return []string{pb.conf} },
		// No libpq variables, and no systemd socket activation or
		// notification meant for the test's own service.
		env:      serverEnv([]string{"PG", "LISTEN_", "NOTIFY_SOCKET"}),
		as:       as,
		probe:    pb.probe,
		shutdown: shutdown,
		clean:    func() error { return nil }, // no pid file, no socket file
	}
	// The configuration names the port: it is written for each port
	// tried, as the port is picked.
	pick := pb.s.cfg.pickPort
	if pick == nil {
		pick = freePort
	}
	pb.s.cfg.pickPort = func() (int, error) {
		port, err := pick()
		if err != nil {
			return 0, err
		}
		if err := pb.writeConfig(port); err != nil {
			return 0, err
		}
		return port, nil
	}
	err = pb.s.launch(
		func() error { return as.chown(pb.s.dir) },
		func() error {
			return writeFileAs(filepath.Join(pb.s.dir, "userlist.txt"), `"`+PostgresUser+`" ""`+"\n", as)
		},
	)
	if err != nil {
		return nil, err
	}
	return pb, nil
}

// StartPgBouncer starts a PgBouncer in front of pg for the test or
// benchmark tb, as [NewPgBouncer] does, and registers a cleanup function
// with tb that stops it (before pg, if pg was started earlier in the same
// test). If PgBouncer cannot be started (including when it is not
// installed, in which case the message says how to install it),
// StartPgBouncer calls tb.Fatal.
func StartPgBouncer(tb TB, pg *Postgres, opts ...Option) *PgBouncer {
	tb.Helper()
	pb, err := NewPgBouncer(pg, opts...)
	return stopAtCleanup(tb, pb, err)
}

// writeConfig writes the configuration for port.
func (pb *PgBouncer) writeConfig(port int) error {
	var b strings.Builder
	pgPort := strconv.Itoa(pb.pg.Port())
	fmt.Fprintf(&b, "[databases]\n")
	fmt.Fprintf(&b, "%s = host=127.0.0.1 port=%s dbname=%s\n", Database, pgPort, Database)
	fmt.Fprintf(&b, "* = host=127.0.0.1 port=%s\n", pgPort)
	fmt.Fprintf(&b, "\n[pgbouncer]\n")
	for _, kv := range [][2]string{
		{"listen_addr", "127.0.0.1"},
		{"listen_port", strconv.Itoa(port)},
		{"unix_socket_dir", ""},
		{"auth_type", "trust"},
		{"auth_file", filepath.Join(pb.s.dir, "userlist.txt")},
		{"admin_users", PostgresUser},
		{"pool_mode", "transaction"},
		{"default_pool_size", strconv.Itoa(PgBouncerPoolSize)},
		{"min_pool_size", "0"},
		{"reserve_pool_size", "0"},
		{"max_client_conn", "100"},
		{"server_login_retry", "0.1"},
		{"ignore_startup_parameters", "extra_float_digits, default_query_exec_mode"},
	} {
		fmt.Fprintf(&b, "%s = %s\n", kv[0], kv[1])
	}
	for _, a := range pb.s.cfg.args {
		name, value, _ := strings.Cut(a, "=")
		fmt.Fprintf(&b, "%s = %s\n", strings.TrimSpace(name), strings.TrimSpace(value))
	}
	return writeFileAs(pb.conf, b.String(), pb.s.as)
}

// writeFileAs writes a file readable by the account as.
func writeFileAs(path, content string, as *account) error {
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		return err
	}
	return as.chown(path)
}

// DSN returns a postgres:// URL for the database [Database] through the
// PgBouncer, as [PostgresUser], over TCP to 127.0.0.1 without TLS:
//
//	postgres://postgres@127.0.0.1:PORT/test?sslmode=disable&default_query_exec_mode=exec
//
// The default_query_exec_mode parameter makes pgx (v5) send each query
// with its arguments in one round trip without a named prepared
// statement, which PgBouncer (before 1.21, without max_prepared_statements)
// cannot keep for a client in transaction pooling mode; PgBouncer ignores
// it if a driver (lib/pq) passes it on. It does not change when PgBouncer
// is restarted.
func (pb *PgBouncer) DSN() string {
	return pgBouncerDSN(pb.s.port, Database, "exec")
}

// AdminDSN returns a postgres:// URL for PgBouncer's admin console, the
// database [PgBouncerAdminDatabase], as [PostgresUser]:
//
//	postgres://postgres@127.0.0.1:PORT/pgbouncer?sslmode=disable&default_query_exec_mode=simple_protocol
//
// The console only understands the simple query protocol, which the
// parameter makes pgx use. Its commands (SHOW POOLS, SHOW CONFIG, ...)
// take no arguments.
func (pb *PgBouncer) AdminDSN() string {
	return pgBouncerDSN(pb.s.port, PgBouncerAdminDatabase, "simple_protocol")
}

func pgBouncerDSN(port int, db, mode string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(PostgresUser),
		Host:     "127.0.0.1:" + strconv.Itoa(port),
		Path:     "/" + db,
		RawQuery: "sslmode=disable&default_query_exec_mode=" + mode,
	}
	return u.String()
}

// Postgres returns the server the PgBouncer is in front of.
func (pb *PgBouncer) Postgres() *Postgres { return pb.pg }

// Addr returns the PgBouncer's address, "127.0.0.1:PORT". It does not
// change when PgBouncer is restarted.
func (pb *PgBouncer) Addr() string { return pb.s.addr() }

// Port returns the PgBouncer's TCP port. It does not change when
// PgBouncer is restarted.
func (pb *PgBouncer) Port() int { return pb.s.port }

// PID returns the process id of the running pgbouncer, which changes
// after [PgBouncer.Restart], or 0 if none is running.
func (pb *PgBouncer) PID() int { return pb.s.pid() }

// Dir returns the PgBouncer's directory, a temporary directory that
// [PgBouncer.Stop] removes. It holds its configuration (Dir()/pgbouncer.ini),
// its user list (Dir()/userlist.txt) and its log ([PgBouncer.LogPath]).
func (pb *PgBouncer) Dir() string { return pb.s.dir }

// LogPath returns the path of the PgBouncer's log, inside [PgBouncer.Dir]:
// everything pgbouncer writes to stdout and stderr.
func (pb *PgBouncer) LogPath() string { return pb.s.logPath }

// Kill sends SIGKILL to pgbouncer, simulating a crash, and returns once it
// has exited. Its clients' connections are closed, and new ones are
// refused until [PgBouncer.Restart]: the port stays reserved meanwhile (on
// Unix), so that no other server started on a free port answers them. The
// server connections it held are closed too, and their backends then end.
// Kill does nothing if pgbouncer is not running.
func (pb *PgBouncer) Kill() error { return pb.s.kill() }

// Pause sends SIGSTOP to pgbouncer and returns once it is stopped: nothing
// answers on the open client connections nor, once the kernel has
// accepted them, on new ones, until [PgBouncer.Resume], so clients time
// out. The Postgres behind it is not paused: its other clients are
// served. Pausing a paused PgBouncer does nothing. Pause returns
// [ErrNotRunning] if pgbouncer is not running.
//
// (This is not PgBouncer's own PAUSE command, which an admin console
// client can still send.)
func (pb *PgBouncer) Pause() error { return pb.s.pause() }

// Resume sends SIGCONT to pgbouncer, undoing [PgBouncer.Pause]; requests
// sent while it was paused are then served. Resuming a PgBouncer that is
// not paused does nothing. Resume returns [ErrNotRunning] if pgbouncer is
// not running.
func (pb *PgBouncer) Resume() error { return pb.s.resume() }

// Restart kills pgbouncer if it is running (as [PgBouncer.Kill] does),
// starts a new one on the same port with the same configuration (and the
// same Postgres), and returns once a query through it is answered. The new
// process has a new pid. Restart works after Kill and Pause and after a
// failed Restart, but returns [ErrStopped] after [PgBouncer.Stop].
func (pb *PgBouncer) Restart() error { return pb.s.restart() }

// Stop ends the PgBouncer for good, by its pid, returns once it has
// exited, and removes its directory. pgbouncer is resumed first if it is
// paused, and asked to shut down: before PgBouncer 1.23 with SIGTERM, its
// immediate shutdown, which closes its client and server connections
// cleanly; from 1.23 on, where SIGTERM and SIGINT wait for the clients or
// their transactions to end, with SIGKILL. If it has not exited after 10
// seconds, it is killed. Stop is idempotent: calls after the first do
// nothing and return nil. After Stop, [PgBouncer.Restart] returns
// [ErrStopped].
func (pb *PgBouncer) Stop() error { return pb.s.stop() }

// probe checks that the PgBouncer on port is this one, by the
// configuration file its admin console names, and that a query sent
// through it reaches pb.pg, by its data directory.
func (pb *PgBouncer) probe(ctx context.Context, port int) error {
	admin, err := pgx.Connect(ctx, pgBouncerDSN(port, PgBouncerAdminDatabase, "simple_protocol"))
	if err != nil {
		return err
	}
	defer admin.Close(context.Background())
	conf, err := pgBouncerSetting(ctx, admin, "conffile")
	if err != nil {
		return err
	}
	if conf != pb.conf {
		return fmt.Errorf("%w: 127.0.0.1:%d is served by the PgBouncer of %s", errPortInUse, port, conf)
	}

	conn, err := pgx.Connect(ctx, pgBouncerDSN(port, Database, "exec"))
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
	if dataDir != pb.pg.dataDir {
		return fmt.Errorf("the PgBouncer on 127.0.0.1:%d reaches the PostgreSQL of %s, not of %s", port, dataDir, pb.pg.dataDir)
	}
	return nil
}

// pgBouncerSetting returns the value of the setting key in the SHOW CONFIG
// of the admin console conn.
func pgBouncerSetting(ctx context.Context, conn *pgx.Conn, key string) (string, error) {
	rows, err := conn.Query(ctx, "SHOW CONFIG")
	if err != nil {
		return "", err
	}
	defer rows.Close()
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return "", err
		}
		if len(vals) >= 2 && vals[0] == key {
			v, _ := vals[1].(string)
			return v, nil
		}
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("SHOW CONFIG has no %s", key)
}

// pgbouncerBinary returns the path of pgbouncer: $DISTLOCK_PGBOUNCER if
// set, otherwise pgbouncer in PATH or /usr/sbin, where Debian's pgbouncer
// package puts it.
func pgbouncerBinary() (string, error) {
	notFound := func(detail string) error {
		return fmt.Errorf("%w: pgbouncer%s: install it with `sudo apt-get install -y pgbouncer` (Debian/Ubuntu) or set %s",
			ErrNotFound, detail, EnvPgBouncer)
	}
	if v := os.Getenv(EnvPgBouncer); v != "" {
		bin, err := exec.LookPath(v)
		if err != nil {
			return "", notFound(fmt.Sprintf(" (%s=%q: %v)", EnvPgBouncer, v, err))
		}
		return bin, nil
	}
	if bin := findExecutable([]string{"pgbouncer"}, "/usr/sbin"); bin != "" {
		return bin, nil
	}
	return "", notFound("")
}

// pgbouncerVersions caches, for each pgbouncer binary, the signal that
// shuts it down at once.
var pgbouncerVersions struct {
	mu  sync.Mutex
	sig map[string]os.Signal
}

var pgbouncerVersionRE = regexp.MustCompile(`PgBouncer (\d+)\.(\d+)`)

// pgbouncerShutdownSignal returns the signal that makes the pgbouncer bin
// exit at once, closing its connections: SIGTERM before version 1.23,
// SIGKILL from then on, when SIGTERM came to wait for every client to
// disconnect and SIGINT for every transaction to end (their immediate
// shutdown, SIGQUIT, is not a signal of every platform Go supports).
func pgbouncerShutdownSignal(bin string) (os.Signal, error) {
	pgbouncerVersions.mu.Lock()
	defer pgbouncerVersions.mu.Unlock()
	if sig, ok := pgbouncerVersions.sig[bin]; ok {
		return sig, nil
	}
	out, err := runTool(bin, "", serverEnv([]string{"PG"}), nil, "", "--version")
	if err != nil {
		return nil, err
	}
	m := pgbouncerVersionRE.FindStringSubmatch(out)
	if m == nil {
		return nil, fmt.Errorf("%s --version: no version in %q", bin, out)
	}
	sig := sigTerm
	if compareVersions(m[1]+"."+m[2], "1.23") >= 0 {
		sig = os.Kill
	}
	if pgbouncerVersions.sig == nil {
		pgbouncerVersions.sig = map[string]os.Signal{}
	}
	pgbouncerVersions.sig[bin] = sig
	return sig, nil
}
