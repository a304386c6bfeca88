// Package sqltest starts real PostgreSQL and MariaDB servers for tests.
//
// Each [Postgres] and [MariaDB] is a server process (for PostgreSQL, a
// postmaster and its backends) started by this package on a free loopback
// port, with its own temporary directory holding its data directory, its
// log and its Unix socket. Every server has a database named [Database]
// ("test") that the DSN methods name, and a superuser that needs no
// password. Tests can make a server misbehave the way a real deployment
// does: Pause freezes it (clients time out), Kill crashes it (clients get
// connection errors), Shutdown stops it cleanly, and Restart brings it
// back on the same address with its committed data.
//
// In tests, use [StartPostgres] and [StartMariaDB], which fail the test if
// the server cannot be started and stop it when the test ends:
//
//	func TestSomething(t *testing.T) {
//		pg := sqltest.StartPostgres(t)
//		conn, err := pgx.Connect(context.Background(), pg.DSN())
//		if err != nil {
//			t.Fatal(err)
//		}
//		defer conn.Close(context.Background())
//		...
//	}
//
// Outside tests (demos, benchmarks), use [NewPostgres] and [NewMariaDB]
// and call Stop when done.
//
// A replica ([Postgres.StartReplica], [Postgres.NewReplica]) is a
// streaming replica (a read-only hot standby) of a Postgres, made with
// pg_basebackup, on a port and in a directory of its own: asynchronous by
// default, or synchronous with [WithSynchronousReplication] (the
// primary's commits then wait for it). [Postgres.Promote] makes it a
// primary, as a failover does; with Kill on the primary first, a test
// sees what a crash and a failover leave.
//
// A [PgBouncer] ([StartPgBouncer], [NewPgBouncer]) is a pgbouncer process
// in front of a Postgres, in transaction pooling mode, on a port of its
// own: its DSN makes pgx run queries without named prepared statements,
// which such a pooler cannot keep for a client. It can be killed, paused
// and restarted like the servers, apart from the Postgres behind it.
//
// The first server of each kind in a test binary runs initdb or
// mariadb-install-db (a second or two) into a template held in memory;
// every server then starts from a copy of it, in a few hundred
// milliseconds. The servers trade durability against a crash of the
// machine for speed (no fsync, no full-page writes or doublewrite buffer),
// but keep every committed transaction across a crash of the server.
//
// The binaries are found in Debian's places: PostgreSQL in the newest
// /usr/lib/postgresql/VERSION/bin (or PATH, or $DISTLOCK_POSTGRES_BINDIR),
// MariaDB's mariadbd in PATH or /usr/sbin (or $DISTLOCK_MARIADBD),
// pgbouncer in PATH or /usr/sbin (or $DISTLOCK_PGBOUNCER). When the test
// runs as root, PostgreSQL and pgbouncer (which refuse to run as root) run
// as the postgres system user, and mariadbd with --user=root.
//
// The package only ever signals processes it started itself, identified by
// the handle returned when starting them, and the children of those; it
// never connects to or touches other servers on the machine, such as
// system services on ports 5432, 6432 and 3306. On Linux the servers are
// also killed if the process that started them dies.
//
// The package lives in its own module so that the database drivers it
// uses to wait for its servers (pgx and go-sql-driver/mysql) stay out of
// the modules that do not use it.
package sqltest
