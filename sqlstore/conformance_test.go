package sqlstore_test

import (
	"context"
	"testing"

	"github.com/distlock/distlock/sqlstore"
	"github.com/distlock/distlock/sqltest"
	"github.com/distlock/distlock/store"
	"github.com/distlock/distlock/store/storetest"
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
	pg := sqltest.StartPostgres(t)
	storetest.Run(t, func(t *testing.T) store.Store { return sqlstore.NewPostgres(pool(t, pg.DSN())) })
}

func TestConformancePostgresPolling(t *testing.T) {
	pg := sqltest.StartPostgres(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		return sqlstore.NewPostgres(pool(t, pg.DSN()), sqlstore.WithoutNotify())
	})
}
