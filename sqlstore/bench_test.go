package sqlstore_test

import (
	"context"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sqlstore"
	"github.com/distlock/distlock/sqltest"
	"github.com/jackc/pgx/v5"
)

// The cost of an uncontended lock and unlock (a pair) on one name, beside
// the raw session lock each database has, on a pinned connection: what
// the store is compared with (bench/cmd/sqlbench compares it with the
// other Go libraries). The store's pair commits twice to disk; an
// advisory lock writes nothing.

func BenchmarkPairsPostgres(b *testing.B) {
	pg := sqltest.StartPostgres(b)
	b.Run("distlock", func(b *testing.B) {
		benchPairs(b, distlock.New(sqlstore.NewPostgres(pool(b, pg.DSN())), distlock.WithLogger(nil)))
	})
	b.Run("advisory", func(b *testing.B) {
		ctx := context.Background()
		c, err := pgx.Connect(ctx, pg.DSN())
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close(ctx)
		for b.Loop() {
			if _, err := c.Exec(ctx, "SELECT pg_advisory_lock(42)"); err != nil {
				b.Fatal(err)
			}
			if _, err := c.Exec(ctx, "SELECT pg_advisory_unlock(42)"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkPairsMariaDB(b *testing.B) {
	m := sqltest.StartMariaDB(b)
	b.Run("distlock", func(b *testing.B) {
		benchPairs(b, distlock.New(sqlstore.NewMySQL(mysqlDB(b, m.DSN())), distlock.WithLogger(nil)))
	})
	b.Run("get_lock", func(b *testing.B) {
		ctx := context.Background()
		c, err := mysqlDB(b, m.DSN()).Conn(ctx)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		for b.Loop() {
			if _, err := c.ExecContext(ctx, "SELECT GET_LOCK('bench', -1)"); err != nil {
				b.Fatal(err)
			}
			if _, err := c.ExecContext(ctx, "SELECT RELEASE_LOCK('bench')"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func benchPairs(b *testing.B, c *distlock.Client) {
	defer c.Close()
	ctx := context.Background()
	m := c.Mutex("bench")
	for b.Loop() {
		l, err := m.Lock(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
