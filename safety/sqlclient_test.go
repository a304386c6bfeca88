package safety

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"io"
	"log"
	"os"
	"sync"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sqlstore"
	"github.com/distlock/distlock/store"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The chaos client's side of the SQL mode (TestChaosSQL,
// TestChaosSQLMariaDB): the distlock.Client on sqlstore, on a pgx pool or
// a database/sql database that reaches the server through this client's
// proxy (clientConfig.SQL), and a recorder around the store that records
// what the checks need of its requests, as the etcd mode's gRPC
// interceptor does. The workload is the etcd mode's (MultiMutex
// included).

// sqlPoolSize is the connections of a client process's pool: its
// workers, their renewals, releases and clean-ups at once (the store's
// listening connection is one more).
const sqlPoolSize = 8

// newSQLLocks makes the client process's pool (or database) on its
// proxy's DSN and its distlock.Client on sqlstore, through a sqlRecorder.
func (c *chaosClient) newSQLLocks(opts []distlock.Option) error {
	var s *sqlstore.Store
	switch c.cfg.SQLFlavor {
	case sqlMariaDB:
		quietMySQLLogs()
		db, err := sql.Open("mysql", c.cfg.SQL)
		if err != nil {
			return err
		}
		db.SetMaxOpenConns(sqlPoolSize)
		db.SetMaxIdleConns(sqlPoolSize)
		s, c.sqlClose = sqlstore.NewMySQL(db), func() { db.Close() }
	default:
		pcfg, err := pgxpool.ParseConfig(c.cfg.SQL)
		if err != nil {
			return err
		}
		pcfg.MaxConns = sqlPoolSize
		// A process started while the server is down starts all the
		// same: the pool dials when a request needs a connection.
		pcfg.MinConns = 0
		pcfg.ConnConfig.ConnectTimeout = sqlClientTimeout(c.cfg.Lease)
		pool, err := pgxpool.NewWithConfig(context.Background(), pcfg)
		if err != nil {
			return err
		}
		s, c.sqlClose = sqlstore.NewPostgres(pool), pool.Close
	}
	c.locks = distlock.New(sqlRecorder{s, c}, opts...)
	return nil
}

// sqlRecorder is the store the client process's distlock.Client uses:
// sqlstore's, every capability of which it passes on (embedded), with the
// requests the checks need recorded, as the etcd mode's etcdRecorder does:
// each acquisition request (Acquire, and each member of AcquireAll) as an
// enq record, with the owner's placeID, the number of the worker's
// acquisition the caller's context carries, and its outcome (acquired,
// queued, refused, wrongkind, unsent: an error wrapping store.ErrUnsent,
// never applied, or error: an outcome unknown); each clean-up (Abandon)
// as an abok record if the store confirmed it, an abf record if not; and
// every other failed request that carries no acquisition number (renewals,
// releases: the engine's own) as an rpcerr record, so that the give-up
// check can leave out the calls whose clean-up may have failed.
type sqlRecorder struct {
	*sqlstore.Store
	c *chaosClient
}

func (s sqlRecorder) Acquire(ctx context.Context, r store.Request) (store.Grant, error) {
	call, callWall := mono(), wall()
	g, err := s.Store.Acquire(ctx, r)
	s.c.recordSQLAcquire(ctx, r, g, err, call, callWall)
	return g, err
}

func (s sqlRecorder) AcquireAll(ctx context.Context, rs []store.Request) ([]store.Grant, error) {
	call, callWall := mono(), wall()
	gs, err := s.Store.AcquireAll(ctx, rs)
	for i, r := range rs {
		var g store.Grant
		if i < len(gs) {
			g = gs[i]
		}
		s.c.recordSQLAcquire(ctx, r, g, err, call, callWall)
	}
	return gs, err
}

func (s sqlRecorder) Abandon(ctx context.Context, r store.Request) (bool, error) {
	freed, err := s.Store.Abandon(ctx, r)
	if err != nil {
		s.c.h.write(record{K: "abf", Client: s.c.cfg.ID, Name: r.Name, Place: placeID(r.Owner), Wall: wall(), T: mono(), Err: err.Error()})
	} else {
		s.c.h.write(record{K: "abok", Client: s.c.cfg.ID, Name: r.Name, Place: placeID(r.Owner), T: mono()})
	}
	return freed, err
}

func (s sqlRecorder) Release(ctx context.Context, r store.Request) (store.Release, error) {
	call := mono()
	out, err := s.Store.Release(ctx, r)
	s.c.recordSQLErr(ctx, "release", call, err)
	return out, err
}

func (s sqlRecorder) Renew(ctx context.Context, rs []store.Request, report func(int, store.Grant, error)) {
	call := mono()
	var mu sync.Mutex
	var failed error
	s.Store.Renew(ctx, rs, func(i int, g store.Grant, err error) {
		if err != nil && !errors.Is(err, store.ErrNotHeld) && !errors.Is(err, store.ErrSuperseded) {
			mu.Lock()
			failed = cmp.Or(failed, err)
			mu.Unlock()
		}
		report(i, g, err)
	})
	s.c.recordSQLErr(ctx, "renew", call, failed)
}

// recordSQLErr records a failed request of the engine's own (no
// acquisition number in ctx) as an rpcerr record.
func (c *chaosClient) recordSQLErr(ctx context.Context, what string, call int64, err error) {
	owner, _ := ctx.Value(ownerKey{}).(int64)
	if err != nil && owner == 0 && !errors.Is(ctx.Err(), context.Canceled) {
		c.h.write(record{K: "rpcerr", Client: c.cfg.ID, Script: what, Call: call, Ret: mono(), Err: err.Error()})
	}
}

// recordSQLAcquire writes the enq record of an acquisition request.
func (c *chaosClient) recordSQLAcquire(ctx context.Context, r store.Request, g store.Grant, err error, call, callWall int64) {
	owner, _ := ctx.Value(ownerKey{}).(int64)
	res := "refused"
	switch {
	case errors.Is(err, store.ErrWrongKind):
		res = "wrongkind"
	case errors.Is(err, store.ErrUnsent):
		res = "unsent"
	case err != nil:
		res = "error"
	case g.Acquired:
		res = "acquired"
	case g.Queued:
		res = "queued"
	}
	c.h.write(record{K: "enq", Client: c.cfg.ID, Owner: owner, Name: r.Name, Place: placeID(r.Owner), Script: "sql_acquire",
		Reenter: r.Reenter, Token: g.Token,
		Call: call, Ret: mono(), CallWall: callWall, Wall: wall(), Res: res, Err: errString(err)})
}

// sqlClientTimeout bounds a client's dial of the server (through its
// proxy): a dial that hangs (the proxy paused) fails within it.
func sqlClientTimeout(lease time.Duration) time.Duration { return lease / 2 }

// quietMySQLLogs drops go-sql-driver/mysql's own log lines (every
// connection a fault resets), as quietRedisLogs does go-redis's, unless
// DISTLOCK_TEST_SQL_LOG is set.
func quietMySQLLogs() {
	if os.Getenv("DISTLOCK_TEST_SQL_LOG") == "" {
		_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	}
}
