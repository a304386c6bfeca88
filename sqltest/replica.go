package sqltest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// replicaOf is what a replica replicates, and how.
type replicaOf struct {
	primary  *Postgres
	name     string // its application_name, in primary_conninfo and pg_stat_replication
	sync     bool   // WithSynchronousReplication
	promoted atomic.Bool
}

// replicaSeq numbers the replicas of the test binary, for their names.
var replicaSeq atomic.Int64

// replicaRetry is how long a replica waits before it connects to its
// primary again (wal_retrieve_retry_interval), instead of PostgreSQL's
// 5 s: a replica streams again soon after its primary is restarted.
const replicaRetry = "100ms"

// NewReplica starts a streaming replica (a hot standby) of pg, which
// must be running, and returns once the replica answers queries and pg
// streams its write-ahead log to it. It is meant for code that is not a
// test; the caller must call Stop on the replica. Tests should use
// [Postgres.StartReplica] instead.
//
// The replica is a [Postgres] of its own, with the life cycle of one (Kill,
// Pause, Restart, Shutdown, Stop; restarted before its promotion, it is a
// replica again and streams again), on a free port of its own and in a
// temporary directory of its own, run by the same system account as pg. It
// is made by
//
//	pg_basebackup -D DIR/data -d "host=127.0.0.1 port=PGPORT user=postgres"
//	  -X stream -c fast --no-sync -w
//
// then started with standby.signal, as [NewPostgres] starts a server (with
// the same settings, plus "-c wal_retrieve_retry_interval=100ms" and the
// replica's own [WithArgs]), streaming from pg with
//
//	primary_conninfo = 'host=127.0.0.1 port=PGPORT user=postgres application_name=NAME'
//
// where NAME, sqltest_replica_N, is unique in the test binary and names
// the replica in pg's pg_stat_replication. What pg_basebackup copies
// includes pg's ALTER SYSTEM settings (postgresql.auto.conf) but not its
// command line; pg's synchronous_standby_names is not copied.
//
// The replica has every transaction that pg committed before NewReplica
// was called, and reads them once NewReplica returns. It is read-only until
// promoted ([Postgres.Promote]): a write fails with SQLSTATE 25006
// (read_only_sql_transaction). Later commits of pg reach it
// asynchronously, unless it is made with [WithSynchronousReplication]. No
// replication slot is used: pg may recycle WAL that a replica kept down for
// long (past max_wal_size) has not received, and the replica then stops
// following it.
//
// The primary and its replicas have separate life cycles: killing or
// stopping pg leaves the replica running, retrying to connect to pg's
// port every 100 ms (a restarted pg streams to it again), until it is
// promoted. pg must be a server started by [NewPostgres] or a promoted
// replica: a replica of a replica in recovery (cascading replication) is
// refused. If pg_basebackup cannot be found beside postgres, the error
// wraps [ErrNotFound]; if pg is not running, [ErrNotRunning]. If the
// replica does not start, nothing is left behind.
func (pg *Postgres) NewReplica(opts ...Option) (*Postgres, error) {
	if pg == nil {
		return nil, errors.New("sqltest: postgres replica: nil *Postgres")
	}
	if pg.of != nil && !pg.of.promoted.Load() {
		return nil, errors.New("sqltest: postgres replica: a replica of a replica in recovery (cascading replication) is not supported")
	}
	binDir, err := postgresBinDir()
	if err != nil {
		return nil, err
	}
	basebackup := filepath.Join(binDir, "pg_basebackup")
	if !isExecutable(basebackup) {
		return nil, fmt.Errorf("%w: pg_basebackup is not in %s, beside postgres: install it with `sudo apt-get install -y postgresql` (Debian/Ubuntu) or set %s",
			ErrNotFound, binDir, EnvPostgresBinDir)
	}
	if running, _, _ := pg.s.state(); !running {
		return nil, fmt.Errorf("sqltest: postgres replica of the server on port %d: %w", pg.s.port, ErrNotRunning)
	}
	as, err := serverAccount()
	if err != nil {
		return nil, fmt.Errorf("sqltest: postgres replica: %w", err)
	}
	cfg := newConfig(opts)
	r, err := newPostgres(binDir, as, cfg)
	if err != nil {
		return nil, err
	}
	r.of = &replicaOf{primary: pg, name: "sqltest_replica_" + strconv.FormatInt(replicaSeq.Add(1), 10), sync: cfg.synchronous}
	err = r.s.launch(
		func() error { return as.chown(r.s.dir) },
		func() error { return r.baseBackup(basebackup) },
	)
	if err != nil {
		return nil, err
	}
	if err := r.follow(); err != nil {
		return nil, errors.Join(fmt.Errorf("sqltest: start postgres replica of the server on port %d: %w", pg.s.port, err), r.Stop())
	}
	return r, nil
}

// StartReplica starts a streaming replica of pg for the test or benchmark
// tb, as [Postgres.NewReplica] does, and registers a cleanup function with
// tb that stops it (before pg, if pg was started earlier in the same
// test). If the replica cannot be started, StartReplica calls tb.Fatal.
func (pg *Postgres) StartReplica(tb TB, opts ...Option) *Postgres {
	tb.Helper()
	r, err := pg.NewReplica(opts...)
	return stopAtCleanup(tb, r, err)
}

// Promote makes a replica started by [Postgres.NewReplica] a primary, as a
// failover does (SELECT pg_promote()), and returns once it is out of
// recovery: it accepts writes, has replayed all the write-ahead log it had
// received, and follows its old primary no more. Its port, DSN and
// directory stay the same, and a Restart starts it as a primary. Promoting
// a promoted replica does nothing.
//
// Promote does not touch the old primary. If it still runs, there are two
// primaries, which diverge; and if the replica was synchronous, the old
// primary's commits wait for it until it is stopped, as they would in
// production. Promote returns an error for a server that is not a replica,
// and when ctx ends first (the promotion may then still complete).
func (pg *Postgres) Promote(ctx context.Context) error {
	if pg.of == nil {
		return pg.s.wrap("promote", errors.New("not a replica"))
	}
	conn, err := pgx.Connect(ctx, pg.DSN())
	if err != nil {
		return pg.s.wrap("promote", err)
	}
	defer closeConn(conn)
	var recovering bool
	if err := conn.QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&recovering); err != nil {
		return pg.s.wrap("promote", err)
	}
	if recovering {
		var signalled bool
		if err := conn.QueryRow(ctx, `SELECT pg_promote(wait => false)`).Scan(&signalled); err != nil {
			return pg.s.wrap("promote", err)
		}
		if !signalled {
			return pg.s.wrap("promote", errors.New("pg_promote() could not signal the postmaster"))
		}
		err := poll(ctx, func() (bool, error) {
			err := conn.QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&recovering)
			return !recovering, err
		})
		if err != nil {
			return pg.s.wrap("promote", fmt.Errorf("waiting for the end of recovery: %w", err))
		}
	}
	pg.of.promoted.Store(true)
	return nil
}

// baseBackup copies the primary's data directory into r's, and makes it a
// standby that streams from the primary.
func (r *Postgres) baseBackup(bin string) error {
	p := r.of.primary
	conninfo := fmt.Sprintf("host=127.0.0.1 port=%d user=%s", p.s.port, PostgresUser)
	if _, err := runTool(bin, r.s.dir, r.s.env, r.s.as, "",
		"-D", r.dataDir, "-d", conninfo, "-X", "stream", "-c", "fast", "--no-sync", "-w",
	); err != nil {
		return err
	}
	auto := filepath.Join(r.dataDir, "postgresql.auto.conf")
	if err := setAutoConf(auto, r.s.as, map[string]string{
		"synchronous_standby_names": "", // the primary's, not the replica's
		"primary_slot_name":         "",
		"primary_conninfo":          conninfo + " application_name=" + r.of.name,
	}); err != nil {
		return err
	}
	return writeDataFile(filepath.Join(r.dataDir, "standby.signal"), nil, r.s.as)
}

// follow waits until the primary streams to r, and, for a synchronous
// replica, until the primary's commits wait for it.
func (r *Postgres) follow() error {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	p := r.of.primary
	if r.of.sync {
		err := p.setSyncs(ctx, true, func(names []string) []string { return append(names, r.of.name) })
		if err != nil {
			return fmt.Errorf("adding %s to synchronous_standby_names: %w", r.of.name, err)
		}
	}
	conn, err := pgx.Connect(ctx, p.DSN())
	if err != nil {
		return err
	}
	defer closeConn(conn)
	var state, syncState string
	err = poll(ctx, func() (bool, error) {
		err := conn.QueryRow(ctx, `SELECT state, sync_state FROM pg_stat_replication WHERE application_name = $1`, r.of.name).
			Scan(&state, &syncState)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, nil
		}
		return err == nil && state == "streaming" && (!r.of.sync || syncState == "quorum" || syncState == "sync"), err
	})
	if err != nil {
		return fmt.Errorf("waiting for the primary to stream to %s (state %q, sync_state %q): %w", r.of.name, state, syncState, err)
	}
	return nil
}

// setSyncs changes the list of synchronous replicas of pg with change,
// and sets synchronous_standby_names to it. A running pg gets it by ALTER
// SYSTEM and a reload; with wait, setSyncs returns once the new setting
// is in force: the commits that start after it are held to it. A pg that
// is not running, or is paused, gets it in its postgresql.auto.conf, in
// force when it next starts.
func (pg *Postgres) setSyncs(ctx context.Context, wait bool, change func([]string) []string) error {
	pg.syncs.mu.Lock()
	defer pg.syncs.mu.Unlock()
	names := change(slices.Clone(pg.syncs.names))
	if slices.Equal(names, pg.syncs.names) {
		return nil
	}
	value := ""
	if len(names) > 0 {
		value = fmt.Sprintf(`ANY %d ("%s")`, len(names), strings.Join(names, `", "`))
	}
	pg.s.mu.Lock()
	live := pg.s.proc != nil && !pg.s.paused
	if !live {
		// Down or paused: nothing runs that could rewrite the file
		// meanwhile (Restart takes s.mu).
		var err error
		if !pg.s.stopped {
			err = setAutoConf(filepath.Join(pg.dataDir, "postgresql.auto.conf"), pg.s.as,
				map[string]string{"synchronous_standby_names": value})
		}
		pg.s.mu.Unlock()
		if err == nil {
			pg.syncs.names = names
		}
		return err
	}
	pg.s.mu.Unlock()

	conn, err := pgx.Connect(ctx, pg.DSN())
	if err != nil {
		return err
	}
	defer closeConn(conn)
	set := `ALTER SYSTEM RESET synchronous_standby_names`
	if value != "" {
		set = `ALTER SYSTEM SET synchronous_standby_names = '` + value + `'`
	}
	if _, err := conn.Exec(ctx, set); err != nil {
		return err
	}
	pg.syncs.names = names
	if _, err := conn.Exec(ctx, `SELECT pg_reload_conf()`); err != nil {
		return err
	}
	if !wait {
		return nil
	}
	// A backend forked after the postmaster has read the new setting has
	// it: the postmaster then had signalled every process, the
	// checkpointer among them, to read it.
	err = poll(ctx, func() (bool, error) {
		c, err := pgx.Connect(ctx, pg.DSN())
		if err != nil {
			return false, err
		}
		defer closeConn(c)
		var got string
		err = c.QueryRow(ctx, `SELECT current_setting('synchronous_standby_names')`).Scan(&got)
		return got == value, err
	})
	if err != nil {
		return fmt.Errorf("waiting for the reload: %w", err)
	}
	// The checkpointer publishes the setting to the committing backends
	// (whether any synchronous standby is defined) when it handles the
	// signal, at the top of its loop, before it looks for a checkpoint to
	// do. It has handled it before it starts a checkpoint requested after
	// another one completed.
	for range 2 {
		if _, err := conn.Exec(ctx, `CHECKPOINT`); err != nil {
			return err
		}
	}
	return nil
}

// stopReplica takes a synchronous replica out of its primary's
// synchronous_standby_names, then stops it.
func (r *Postgres) stopReplica() error {
	var err error
	if r.of.sync {
		ctx, cancel := context.WithTimeout(context.Background(), stopGrace)
		err = r.of.primary.setSyncs(ctx, false, func(names []string) []string {
			return slices.DeleteFunc(names, func(n string) bool { return n == r.of.name })
		})
		cancel()
		if err != nil {
			err = r.s.wrap("stop", fmt.Errorf("taking %s out of the synchronous_standby_names of the server on port %d: %w",
				r.of.name, r.of.primary.s.port, err))
		}
	}
	return errors.Join(err, r.s.stop())
}

// state reports whether the server runs (and is not paused), is paused,
// or was stopped.
func (s *server) state() (running, paused, stopped bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil && !s.paused, s.paused, s.stopped
}

// setAutoConf rewrites the postgresql.auto.conf at path: each setting of
// set replaces the file's lines for it, and one set to "" is removed.
func setAutoConf(path string, as *account, set map[string]string) error {
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	var out []string
	for line := range strings.Lines(string(b)) {
		name, _, _ := strings.Cut(strings.TrimSpace(line), "=")
		if _, ok := set[strings.TrimSpace(name)]; !ok {
			out = append(out, strings.TrimSuffix(line, "\n"))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(set)) {
		if v := set[name]; v != "" {
			out = append(out, name+" = '"+strings.ReplaceAll(v, "'", "''")+"'")
		}
	}
	return writeDataFile(path, []byte(strings.Join(out, "\n")+"\n"), as)
}

// writeDataFile writes a file of a data directory, readable by its owner
// only, owned by as.
func writeDataFile(path string, data []byte, as *account) error {
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return err
	}
	return as.chown(path)
}

// poll calls done every pollInterval until it returns true or an error,
// or ctx ends; then it returns done's last error, or ctx's.
func poll(ctx context.Context, done func() (bool, error)) error {
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		ok, err := done()
		if ok && err == nil {
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			if err != nil {
				return fmt.Errorf("%w: %w", ctx.Err(), err)
			}
			return ctx.Err()
		}
	}
}

// closeConn closes conn, within a second.
func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}
