package sqlstore_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/distlock/distlock/sqlstore"
	"github.com/distlock/distlock/sqltest"
	"github.com/distlock/distlock/store"
	"github.com/distlock/distlock/store/storetest"
	_ "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pool returns a pool on pg, closed when the test ends.
func pool(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func TestConformancePostgres(t *testing.T) {
	t.Parallel() // each on a server of its own; most of the suite waits for leases
	pg := sqltest.StartPostgres(t)
	storetest.Run(t, func(t *testing.T) store.Store { return sqlstore.NewPostgres(pool(t, pg.DSN())) })
}

func TestConformancePostgresPolling(t *testing.T) {
	t.Parallel() // each on a server of its own; most of the suite waits for leases
	pg := sqltest.StartPostgres(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		return sqlstore.NewPostgres(pool(t, pg.DSN()), sqlstore.WithoutNotify())
	})
}

func TestConformanceMariaDB(t *testing.T) {
	t.Parallel() // each on a server of its own; most of the suite waits for leases
	m := sqltest.StartMariaDB(t)
	storetest.Run(t, func(t *testing.T) store.Store { return sqlstore.NewMySQL(mysqlDB(t, m.DSN())) })
}

// mysqlDB returns a database on dsn, closed when the test ends.
func mysqlDB(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestConformancePgBouncer: through PgBouncer in transaction pooling mode,
// where a session outlives no transaction (LISTEN does not work, and a
// session advisory lock would be left on a backend another client gets):
// the store's steps are each one transaction, and its waiters poll.
func TestConformancePgBouncer(t *testing.T) {
	t.Parallel() // each on a server of its own; most of the suite waits for leases
	pg := sqltest.StartPostgres(t)
	bouncer := sqltest.StartPgBouncer(t, pg)
	storetest.Run(t, func(t *testing.T) store.Store {
		return sqlstore.NewPostgres(pool(t, bouncer.DSN()), sqlstore.WithoutNotify())
	})
}
