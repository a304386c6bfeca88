// Package sqlstore keeps distlock's locks in a SQL database you already
// run: PostgreSQL (12 or later, through a pgx pool) or MariaDB (10.6 or
// later) and MySQL (8.0 or later) through database/sql.
//
//	pool, _ := pgxpool.New(ctx, "postgres://app@db/app")
//	c := distlock.New(sqlstore.NewPostgres(pool))
//	defer c.Close()
//
//	db, _ := sql.Open("mysql", "app:secret@tcp(db:3306)/app")
//	c := distlock.New(sqlstore.NewMySQL(db))
//
// It serves every kind: Mutex, MultiMutex (all members in one
// transaction: all taken or none), FairMutex, RWMutex, Semaphore (with
// SetPermits), Election (with Observe), Once and OncePer (periods counted
// by the database's clock), Inspect, List, ForceUnlock and Revoke.
// LockTx takes a lock inside your own transaction instead, for a short
// critical section atomic with your writes.
//
// # A lease table, not session locks
//
// A lock is a row of one table (distlock_locks; WithTable), never a
// database session: pg_advisory_lock and GET_LOCK belong to a connection,
// so a pool hands them to the wrong caller, a pooler in transaction mode
// (PgBouncer) strands them on a backend another client then uses, and an
// idle connection closed by wait_timeout frees them without a word. Here
// the lock is held by an owner id with a lease, so it survives a dropped
// connection, works through any pooler, and can be read by anyone:
//
//	SELECT name, kind, owner_id, expires_at FROM distlock_locks WHERE expires_at > now();
//
// Each step of the store (an acquisition, a release, a renewal of up to
// 100 locks) reads the lock's row with the database's clock, applies the
// step to the lock's state (a JSON column: holders, queue, abandoned
// owners) and writes it back, atomically: on PostgreSQL in one
// transaction that locks its rows with SELECT … FOR UPDATE, in name order
// (so that two steps never wait for each other in a cycle), in two round
// trips (BEGIN and the reads in one, the writes, NOTIFY and COMMIT in the
// other); on MySQL by a compare-and-swap (see Failures). Taking a free
// mutex and releasing the only hold of one nobody is queued for are one
// statement each (on PostgreSQL the release's statement also sends the
// notice that wakes waiters, when there are any). Rows are made on first
// use, by a statement of their own outside any transaction (MySQL's gap
// locks never come into play), and are never deleted.
//
// # Leases and clocks
//
// Expiries are the database's clock (clock_timestamp(), UTC_TIMESTAMP(6))
// read inside the step's transaction after its rows are locked, never a
// client's: a lease ends no earlier than its length after the request was
// sent, and the Client ends its lease context, measured from its own send
// time, before that. What this rests on: the database's clock runs at
// about the rate of the clients' clocks, and does not step back (an NTP
// step back by d lengthens every lease by d; forward, shortens it). A
// lease or queue timeout shorter than MinLease is refused.
//
// # Fencing tokens
//
// Each row keeps the last token issued for its name (the token column);
// a new one is the larger of that + 1 and the database's clock in
// microseconds, written in the same transaction that grants the lock. So
// tokens strictly increase per name, across restarts (the row is durable,
// as the commit is), and even if a row were deleted by hand, unless the
// database's clock stepped back meanwhile.
//
// # Waiting
//
// A step's notices (a plain mutex released, a queued lock granted to the
// next in line, a leader elected, a holder revoked) are sent with
// pg_notify in its transaction, so PostgreSQL delivers them when it
// commits, to the one connection per store that LISTENs on the table's
// channel: a release wakes the waiters of other processes in about one
// round trip. MySQL and MariaDB have no notifications, and LISTEN does
// not work behind a pooler in transaction mode (WithoutNotify): there the
// store reads the rows of the locks its Client waits for, in one query,
// every 2 ms while a wait is young, backing off to the poll interval
// (50 ms), and wakes the waiters of those that changed. Either way the
// Client also tries again when the holder's lease would end, so a lost
// notice costs time, not the lock.
//
// The queued kinds wait in line in the row's queue, in arrival order; a
// release grants the lock to the first in line in the same transaction,
// and a grantee learns of it by a notice or by its next refresh. A grant
// needs no confirmation (the store is not a store.GrantConfirmer): it was
// committed before anyone could hear of it.
//
// # Failures
//
// A step whose connection fails before its COMMIT was sent is rolled back
// by the server and can never apply: its error wraps store.ErrUnsent, and
// the Client cleans nothing up after it. A COMMIT without an answer may
// have applied: the Client counts it as possibly applied, as it does for
// every store, and gives the owner up (an abandonment mark in the row
// refuses the owner's late requests).
//
// A release that grants nothing commits on PostgreSQL with
// synchronous_commit off: Unlock returns before it is on disk, and a
// crash of the server within a few hundred milliseconds (three times
// wal_writer_delay) loses it. The lock is then held, by an owner that no
// longer renews it, until its lease ends: nobody else gets it before
// (safe), but it is unavailable for up to a lease after the crash.
//
// A step on PostgreSQL is a transaction of two round trips that holds its
// rows locked in between; a client that goes silent there (a partition,
// a frozen process) has its session ended by the server after half a
// second (idle_in_transaction_session_timeout, set for the step only),
// not when TCP keepalive notices, hours later. On MySQL a step holds no
// row across round trips: it reads its row, and writes it back with a
// compare-and-swap on the row's rev in one statement, starting again if
// another step wrote it meanwhile; so MultiMutex takes its members one
// after another there (all or none still: the Client gives back those it
// took if one is refused), and renewals are a step per lock.
//
// What holds on failover: the store is as durable as the database's
// commits. With synchronous replication (on PostgreSQL, the standby in
// synchronous_standby_names and synchronous_commit on for the store's
// sessions), a promoted standby has every step whose COMMIT returned: a
// lock a Client was told it holds stays held there until its lease ends,
// and later tokens are above its token (the row's last + 1), whatever the
// clocks. What rests on the clocks: that lease's end, written by the old
// primary's clock, is judged by the new one's, which must not be ahead by
// more than the Client's margin. A release that granted nothing may be
// lost (it does not wait for the standby): the lock is then held until
// its lease ends. With asynchronous replication, a promoted replica may
// lack the last commits, as a Redis replica may: a lock taken just before
// may be free on it, and two owners may hold it at once; their tokens
// still increase as long as the promoted server's clock, at the new
// grant, is past the old primary's at the lost one (a token is the larger
// of the row's last + 1 and the clock in µs). A Client pointed at a
// read-only standby fails every step that writes at once, with ErrBackend
// (SQLSTATE 25006); give a multi-host DSN target_session_attrs=read-write.
// See docs/guarantees.md (SQL) for the details and the tests
// (replica_test.go).
//
// # Schema
//
// The store creates its tables on first use if they are missing (under
// pg_advisory_xact_lock or GET_LOCK, so that Clients starting together do
// not race); WithoutMigration makes it use them as they are, for teams
// that apply PostgresSchema or MySQLSchema with their own migrations
// (`distlock sql-schema postgres` prints it), or run Store.Migrate in a
// deployment step that has the privileges to create tables.
//
// The store never closes the pool or database given to it: close them
// after the Client.
package sqlstore
