package sqlstore_test

// Replica tests of the PostgreSQL store: a Client pointed at a read-only
// standby, and a standby promoted after its primary was killed, with
// synchronous replication (package sqltest's replicas). What they show is
// what docs/guarantees.md says holds under promotion: with synchronous
// replication, every acquisition and renewal a Client was told of is on
// the promoted server, so the lock stays held until its lease ends and
// later tokens are above its token; a release may be lost (it is
// committed without waiting for the standby), which leaves the lock held
// until its lease ends, never free early. Asynchronous replication is not
// tested: a promotion may lose the last acquisitions there (see the
// guarantees), which a test could only show by chance.

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sqlstore"
	"github.com/distlock/distlock/sqltest"
	"github.com/distlock/distlock/store"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// replicaTTL is the lease of the locks held across a promotion: the tests
// wait for it to end on the promoted server, and the kill, the promotion
// and a connection to the promoted server must fit in it (about 0.2 s
// here; 5 s leaves room for a loaded CI machine).
const replicaTTL = 5 * time.Second

// replicaClient returns a Client on a store on pg, without logging,
// closed when the test ends.
func replicaClient(t *testing.T, pg *sqltest.Postgres, opts ...sqlstore.Option) *distlock.Client {
	t.Helper()
	return faultClient(t, sqlstore.NewPostgres(pool(t, pg.DSN()), opts...))
}

// replicaRow is a lock's row as a server has it: its last token, and the
// end of its holder's lease in µs of the server's clock (0 if free).
type replicaRow struct {
	token int64
	until int64
	owner string
}

func readReplicaRow(t *testing.T, pg *sqltest.Postgres, name string) replicaRow {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, pg.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var r replicaRow
	var until *int64
	var owner *string
	err = c.QueryRow(ctx, `SELECT token, (extract(epoch from expires_at) * 1000000)::bigint, owner_id
		FROM distlock_locks WHERE name = $1`, name).Scan(&r.token, &until, &owner)
	if err != nil {
		t.Fatalf("read the row of %q on port %d: %v", name, pg.Port(), err)
	}
	if until != nil {
		r.until = *until
	}
	if owner != nil {
		r.owner = *owner
	}
	return r
}

// TestReplicaStandbyRefusesLocks: a Client whose pool points at a hot
// standby (read-only until promoted) gets typed errors from every step
// that writes: ErrBackend (and ErrUnsent: nothing was applied, so the
// Client has nothing to clean up), with the server's SQLSTATE 25006
// underneath, at once rather than when its context ends. Reads work:
// Inspect sees the lock the primary holds.
func TestReplicaStandbyRefusesLocks(t *testing.T) {
	t.Parallel() // each on servers of its own
	pg := sqltest.StartPostgres(t)
	primary := replicaClient(t, pg)
	held, err := primary.Mutex("held", distlock.WithTTL(time.Hour)).Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(context.Background())
	// Made after the tables and the lock: it has them.
	standby := pg.StartReplica(t)
	c := replicaClient(t, standby)

	readOnly := func(what string, err error) {
		t.Helper()
		var pe *pgconn.PgError
		switch {
		case err == nil:
			t.Errorf("%s on a standby: no error", what)
		case !errors.Is(err, distlock.ErrBackend) || !errors.Is(err, store.ErrUnsent):
			t.Errorf("%s on a standby: %v, want ErrBackend and ErrUnsent", what, err)
		case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
			t.Errorf("%s on a standby: waited for its context: %v", what, err)
		case !errors.As(err, &pe) || pe.Code != "25006":
			t.Errorf("%s on a standby: %v, want the server's SQLSTATE 25006 underneath", what, err)
		case !strings.Contains(err.Error(), "read-only"):
			t.Errorf("%s on a standby: %q does not say read-only", what, err)
		case !strings.Contains(err.Error(), "Point the store at the primary"):
			t.Errorf("%s on a standby: %q does not say what to do", what, err)
		case strings.Contains(err.Error(), "WithoutMigration"):
			t.Errorf("%s on a standby: %q suggests WithoutMigration, which would not help", what, err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	l, err := c.Mutex("free").TryLock(ctx)
	readOnly("TryLock of a free mutex", err)
	if l != nil {
		t.Errorf("TryLock returned a lease with %v", err)
	}
	_, err = c.Mutex("free").Lock(ctx)
	readOnly("Lock of a free mutex", err)
	_, err = c.Mutex("held").TryLock(ctx)
	readOnly("TryLock of a held mutex", err)
	_, err = c.FairMutex("fair").TryLock(ctx)
	readOnly("TryLock of a fair mutex", err)
	_, err = c.RWMutex("rw").TryRLock(ctx)
	readOnly("TryRLock", err)
	_, err = c.Semaphore("sem", 2).TryAcquire(ctx, 1)
	readOnly("TryAcquire", err)
	_, err = c.MultiMutex([]string{"m1", "m2"}).TryLock(ctx)
	readOnly("MultiMutex.TryLock", err)
	_, err = c.Mutex("held").ForceUnlock(ctx)
	readOnly("ForceUnlock", err)

	info, err := c.Mutex("held").Inspect(ctx)
	if err != nil || !info.Locked || info.Token != held.Token() {
		t.Errorf("Inspect on the standby: %+v, %v; want the primary's holder, token %d", info, err, held.Token())
	}

	// A store whose tables the standby lacks cannot make them there.
	_, err = replicaClient(t, standby, sqlstore.WithTable("other_locks")).Mutex("free").TryLock(ctx)
	readOnly("TryLock on a standby without the tables", err)
}

// TestReplicaPromotedSynchronous: with synchronous replication, a
// promotion after the primary was killed (SIGKILL) loses nothing a Client
// was told of.
//
// held: a lock acquired (and extended) on the primary is on the promoted
// server with its token and lease; a second Client is refused it there,
// and gets it only once the first holder's lease context has ended and,
// by the promoted server's clock, its lease too (the new token, the
// server's clock in µs at the grant, is at or past the lease's end), with
// a token above the first.
//
// released: a lock released on the primary just before the kill may be
// free on the promoted server, or still held by its old holder (the
// release is committed with synchronous_commit off, without waiting for
// the standby): then it is granted only after that lease's end. Either
// way the new token is above the old one.
func TestReplicaPromotedSynchronous(t *testing.T) {
	t.Parallel() // each subtest on servers of its own
	const name = "promoted"
	// failover starts a primary and a synchronous standby, runs before
	// on a Client of the primary, kills the primary, promotes the
	// standby, and returns a Client on it and the row the promoted server
	// has of the lock.
	failover := func(t *testing.T, before func(c *distlock.Client) *distlock.Lease) (*distlock.Lease, *distlock.Client, replicaRow) {
		pg := sqltest.StartPostgres(t)
		standby := pg.StartReplica(t, sqltest.WithSynchronousReplication())
		l1 := before(replicaClient(t, pg))
		if err := pg.Kill(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		if err := standby.Promote(ctx); err != nil {
			t.Fatalf("promote: %v", err)
		}
		row := readReplicaRow(t, standby, name)
		if row.token != int64(l1.Token()) {
			t.Fatalf("the promoted server has token %d for %q, want the acquisition's, %d", row.token, name, l1.Token())
		}
		return l1, replicaClient(t, standby), row
	}
	// lockAfter takes the lock on c, waiting for it (a Lock: woken by the
	// holder's lease end), and checks that the grant came after the
	// lease of the row, by the promoted server's clock, and with a token
	// above l1's.
	lockAfter := func(t *testing.T, c *distlock.Client, l1 *distlock.Lease, row replicaRow) *distlock.Lease {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		l2, err := c.Mutex(name, distlock.WithTTL(replicaTTL)).Lock(ctx)
		if err != nil {
			t.Fatalf("lock on the promoted server: %v", err)
		}
		t.Cleanup(func() { l2.Unlock(context.Background()) })
		checkAfter(t, l1, l2, row)
		return l2
	}

	t.Run("held", func(t *testing.T) {
		t.Parallel()
		l1, c2, row := failover(t, func(c *distlock.Client) *distlock.Lease {
			l, err := c.Mutex(name, distlock.WithTTL(replicaTTL)).Lock(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			// The lease as long as it gets before the kill.
			if err := l.Extend(t.Context(), replicaTTL); err != nil {
				t.Fatal(err)
			}
			return l
		})
		if row.owner == "" || row.until == 0 {
			t.Fatalf("the promoted server has %q free (%+v): the acquisition's commit was not replicated", name, row)
		}
		l2, err := c2.Mutex(name, distlock.WithTTL(replicaTTL)).TryLock(t.Context())
		switch {
		case err == nil:
			checkAfter(t, l1, l2, row)
			l2.Unlock(context.Background())
			t.Fatalf("the first TryLock on the promoted server acquired %q: the holder's lease (context: %v) had ended already (a run this slow cannot show the refusal)",
				name, context.Cause(l1.Context()))
		case !errors.Is(err, distlock.ErrNotAcquired) || errors.Is(err, distlock.ErrBackend):
			t.Fatalf("TryLock on the promoted server: %v, want ErrNotAcquired", err)
		}
		lockAfter(t, c2, l1, row)
	})

	t.Run("released", func(t *testing.T) {
		t.Parallel()
		l1, c2, row := failover(t, func(c *distlock.Client) *distlock.Lease {
			l, err := c.Mutex(name, distlock.WithTTL(replicaTTL)).Lock(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
			return l
		})
		if row.owner == "" {
			t.Log("the release reached the standby: the lock is free on the promoted server")
			l2, err := c2.Mutex(name, distlock.WithTTL(replicaTTL)).TryLock(t.Context())
			if err != nil {
				t.Fatalf("TryLock of the released lock on the promoted server: %v", err)
			}
			defer l2.Unlock(context.Background())
			if l2.Token() <= l1.Token() {
				t.Fatalf("token %d on the promoted server, not above %d", l2.Token(), l1.Token())
			}
			return
		}
		t.Log("the release was lost in the promotion: the lock is held until its lease ends")
		lockAfter(t, c2, l1, row)
	})
}

// checkAfter checks that l2 was granted after l1's lease: l1's lease
// context was done when l2 was granted, l2's token is above l1's, and
// the grant came at or after the end of the lease that row has, by the
// clock of the server that granted it (a token is the larger of the last
// + 1 and that clock in µs).
func checkAfter(t *testing.T, l1, l2 *distlock.Lease, row replicaRow) {
	t.Helper()
	if l1.Context().Err() == nil {
		t.Errorf("%q granted on the promoted server while the first holder's lease context is live", l2.Name())
	}
	if l2.Token() <= l1.Token() {
		t.Errorf("token %d on the promoted server, not above the first holder's, %d", l2.Token(), l1.Token())
	}
	if row.until != 0 && int64(l2.Token()) < row.until {
		t.Errorf("token %d: granted before the end of the first holder's lease on the promoted server, %d µs", l2.Token(), row.until)
	}
}
