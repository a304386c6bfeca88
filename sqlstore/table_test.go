package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sqlstore"
	"github.com/distlock/distlock/sqltest"
	"github.com/jackc/pgx/v5"
)

// A database under test: its server, a store on it, and how to read its
// table directly.
type database struct {
	name    string
	restart func() error
	store   func(t *testing.T, opts ...sqlstore.Option) *sqlstore.Store
	// query runs a query that returns one row, on a connection of its own.
	query func(t *testing.T, q string, args []any, dest ...any)
}

// databases starts a PostgreSQL and a MariaDB server and runs check on
// each, as subtests.
func databases(t *testing.T, check func(t *testing.T, db database)) {
	t.Run("PostgreSQL", func(t *testing.T) {
		t.Parallel()
		pg := sqltest.StartPostgres(t)
		check(t, database{
			name:    "postgres",
			restart: pg.Restart,
			store: func(t *testing.T, opts ...sqlstore.Option) *sqlstore.Store {
				return sqlstore.NewPostgres(pool(t, pg.DSN()), opts...)
			},
			query: func(t *testing.T, q string, args []any, dest ...any) {
				t.Helper()
				c, err := pgx.Connect(t.Context(), pg.DSN())
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close(context.Background())
				if err := c.QueryRow(t.Context(), q, args...).Scan(dest...); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			},
		})
	})
	t.Run("MariaDB", func(t *testing.T) {
		t.Parallel()
		m := sqltest.StartMariaDB(t)
		check(t, database{
			name:    "mysql",
			restart: m.Restart,
			store: func(t *testing.T, opts ...sqlstore.Option) *sqlstore.Store {
				return sqlstore.NewMySQL(mysqlDB(t, m.DSN()), opts...)
			},
			query: func(t *testing.T, q string, args []any, dest ...any) {
				t.Helper()
				db, err := sql.Open("mysql", m.DSN())
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				if err := db.QueryRowContext(t.Context(), q, args...).Scan(dest...); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			},
		})
	})
}

// placeholder is the dialect's first query parameter.
func (db database) placeholder() string {
	if db.name == "postgres" {
		return "$1"
	}
	return "?"
}

// client returns a Client on a new store of db, closed when the test ends.
func (db database) client(t *testing.T, opts ...sqlstore.Option) *distlock.Client {
	c := distlock.New(db.store(t, opts...), distlock.WithLogger(nil))
	t.Cleanup(func() { c.Close() })
	return c
}

// TestTokensSurviveRestarts: a lock's row outlives its release, and its
// token counter a restart of the server: the first token after the
// restart is above every token before it.
func TestTokensSurviveRestarts(t *testing.T) {
	databases(t, func(t *testing.T, db database) {
		c := db.client(t)
		var last uint64
		for range 3 {
			l, err := c.Mutex("tokens").Lock(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if l.Token() <= last {
				t.Fatalf("token %d after %d", l.Token(), last)
			}
			last = l.Token()
			if err := l.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		var kept uint64
		db.query(t, "SELECT token FROM distlock_locks WHERE name = "+db.placeholder(), []any{"tokens"}, &kept)
		if kept != last {
			t.Fatalf("the released lock's row keeps token %d, want %d", kept, last)
		}
		c.Close()
		if err := db.restart(); err != nil {
			t.Fatal(err)
		}
		c2 := db.client(t)
		l, err := c2.Mutex("tokens").Lock(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer l.Unlock(context.Background())
		if l.Token() <= last {
			t.Fatalf("token %d after the restart, not above %d before it", l.Token(), last)
		}
	})
}

// TestExpiryByTheDatabaseClock: a lock's expires_at, as the database
// reads it, lies within its lease from the database's now, and a renewal
// (Extend) moves it.
func TestExpiryByTheDatabaseClock(t *testing.T) {
	databases(t, func(t *testing.T, db database) {
		c := db.client(t)
		l, err := c.Mutex("expiry", distlock.WithTTL(time.Hour)).Lock(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer l.Unlock(context.Background())
		left := db.left(t, "expiry")
		if left <= 59*time.Minute || left > time.Hour {
			t.Fatalf("expires_at is %v from the database's now, want within (59m, 1h]", left)
		}
		if err := l.Extend(t.Context(), 2*time.Hour); err != nil {
			t.Fatal(err)
		}
		if left := db.left(t, "expiry"); left <= 119*time.Minute || left > 2*time.Hour {
			t.Fatalf("after Extend(2h), expires_at is %v from the database's now", left)
		}
	})
}

// left is what is left of the lease of lock name, by the database's clock.
func (db database) left(t *testing.T, name string) time.Duration {
	var us int64
	if db.name == "postgres" {
		db.query(t, "SELECT (extract(epoch FROM expires_at - clock_timestamp()) * 1000000)::bigint FROM distlock_locks WHERE name = $1", []any{name}, &us)
	} else {
		db.query(t, "SELECT TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) FROM distlock_locks WHERE name = ?", []any{name}, &us)
	}
	return time.Duration(us) * time.Microsecond
}

// TestSchemaOnFirstUse: Clients that start together on a database
// without the tables all make their first acquisition (the tables are
// made once, under a lock); a store WithTable uses its own table.
func TestSchemaOnFirstUse(t *testing.T) {
	databases(t, func(t *testing.T, db database) {
		const n = 8
		var wg sync.WaitGroup
		errs := make([]error, n)
		start := make(chan struct{})
		for i := range n {
			c := db.client(t)
			wg.Go(func() {
				<-start
				l, err := c.Mutex("first-use").TryLock(t.Context())
				if err == nil {
					err = l.Unlock(t.Context())
				} else if errors.Is(err, distlock.ErrNotAcquired) {
					err = nil
				}
				errs[i] = err
			})
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("client %d: %v", i, err)
			}
		}
		c := db.client(t, sqlstore.WithTable("other_locks"))
		l, err := c.Mutex("first-use").Lock(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer l.Unlock(context.Background())
		var kind string
		var token uint64
		db.query(t, "SELECT kind, token FROM other_locks WHERE name = "+db.placeholder(), []any{"first-use"}, &kind, &token)
		if kind != "mutex" || token != l.Token() {
			t.Fatalf("other_locks has a %q with token %d, want a mutex with %d", kind, token, l.Token())
		}
	})
}

// TestSchemaAppliedByHand: the schema PostgresSchema and MySQLSchema
// print, applied by hand, is what a store WithoutMigration uses; without
// it, such a store's first operation fails and says why; Migrate makes
// the tables of such a store.
func TestSchemaAppliedByHand(t *testing.T) {
	t.Run("PostgreSQL", func(t *testing.T) {
		t.Parallel()
		pg := sqltest.StartPostgres(t)
		p := pool(t, pg.DSN())
		c := distlock.New(sqlstore.NewPostgres(p, sqlstore.WithoutMigration(), sqlstore.WithTable("manual")), distlock.WithLogger(nil))
		defer c.Close()
		if _, err := c.Mutex("m").TryLock(t.Context()); !errors.Is(err, distlock.ErrBackend) {
			t.Fatalf("TryLock without the tables: %v, want ErrBackend", err)
		}
		text, err := sqlstore.PostgresSchema(sqlstore.WithTable("manual"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Exec(t.Context(), text); err != nil {
			t.Fatal(err)
		}
		lockWith(t, c)

		// Migrate makes the tables of a store made WithoutMigration.
		m := sqlstore.NewPostgres(p, sqlstore.WithoutMigration(), sqlstore.WithTable("migrated"))
		if err := m.Migrate(t.Context()); err != nil {
			t.Fatal(err)
		}
		cm := distlock.New(m, distlock.WithLogger(nil))
		defer cm.Close()
		lockWith(t, cm)
	})
	t.Run("MariaDB", func(t *testing.T) {
		t.Parallel()
		m := sqltest.StartMariaDB(t)
		db := mysqlDB(t, m.DSN()+"&multiStatements=true")
		c := distlock.New(sqlstore.NewMySQL(db, sqlstore.WithoutMigration(), sqlstore.WithTable("manual")), distlock.WithLogger(nil))
		defer c.Close()
		if _, err := c.Mutex("m").TryLock(t.Context()); !errors.Is(err, distlock.ErrBackend) {
			t.Fatalf("TryLock without the tables: %v, want ErrBackend", err)
		}
		text, err := sqlstore.MySQLSchema(sqlstore.WithTable("manual"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(t.Context(), text); err != nil {
			t.Fatal(err)
		}
		lockWith(t, c)

		// Migrate makes the tables of a store made WithoutMigration.
		mg := sqlstore.NewMySQL(db, sqlstore.WithoutMigration(), sqlstore.WithTable("migrated"))
		if err := mg.Migrate(t.Context()); err != nil {
			t.Fatal(err)
		}
		cm := distlock.New(mg, distlock.WithLogger(nil))
		defer cm.Close()
		lockWith(t, cm)
	})
}

// lockWith takes and releases a mutex, a fair mutex and a job run once.
func lockWith(t *testing.T, c *distlock.Client) {
	t.Helper()
	for _, lock := range []func() (*distlock.Lease, error){
		func() (*distlock.Lease, error) { return c.Mutex("m").Lock(t.Context()) },
		func() (*distlock.Lease, error) { return c.FairMutex("f").Lock(t.Context()) },
	} {
		l, err := lock()
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	run, err := c.Once(t.Context(), "job", time.Hour, func(context.Context, uint64) error { return nil })
	if err != nil || run.State != distlock.RanHere {
		t.Fatalf("Once: %v, %v", run.State, err)
	}
}
