package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sqltest"
	"github.com/distlock/distlock/store"
	_ "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestFreeTakeIsTake: the state the fast path writes is, byte for byte,
// what the general path's take of a free mutex encodes (so the row reads
// the same whichever path took it, and the next step writes nothing it
// need not).
func TestFreeTakeIsTake(t *testing.T) {
	for _, tc := range []struct {
		r    store.Request
		host string
		pid  int
	}{
		{store.Request{Name: "n", Owner: "0123abcd", Hold: 1, Seq: 1, Lease: 30 * time.Second}, "vm", 4242},
		{store.Request{Name: "n", Owner: `we"ird<&>`, Hold: 0, Seq: 7, Lease: 1500 * time.Millisecond}, "", 0},
		{store.Request{Name: "n", Owner: "o", Hold: 9, Seq: 0, Lease: time.Hour}, "host \"q\" <x>", 1},
	} {
		var token uint64 = 41
		now := int64(1_795_800_000_123_456)
		var l lockState
		st := &step{name: "n", now: now, token: &token}
		g, err := l.acquire(st, tc.r, tc.host, tc.pid)
		if err != nil || !g.Acquired {
			t.Fatalf("general take: %+v, %v", g, err)
		}
		want, _ := json.Marshal(&l)
		got := newFreeTake(tc.r, tc.host, tc.pid).state(token, now+micros(tc.r.Lease), now/1000)
		if got != string(want) {
			t.Errorf("fast path state\n%s\ngeneral path state\n%s", got, want)
		}
	}
}

// counted counts the transactions a store's dialect begins.
type counted struct {
	dialect
	fastPath
	begun atomic.Int64
}

func (c *counted) begin(ctx context.Context) (transaction, error) {
	c.begun.Add(1)
	return c.dialect.begin(ctx)
}

// countedListener is counted for a dialect that listens (PostgreSQL's),
// so that the store it wraps listens as it would unwrapped, instead of
// polling.
type countedListener struct {
	*counted
	listener
}

// TestFastPathTaken: once a lock's row exists, an uncontended Lock and
// Unlock begin no transaction on either database (each is one
// statement), and the row a fast Lock leaves is the general path's: a
// contended attempt, which goes the general way, reads it and refuses.
func TestFastPathTaken(t *testing.T) {
	for _, db := range []struct {
		name string
		// start starts a server, and returns how to make stores on it.
		start func(t *testing.T) func() *Store
	}{
		{"PostgreSQL", func(t *testing.T) func() *Store {
			pg := sqltest.StartPostgres(t)
			return func() *Store {
				p, err := pgxpool.New(t.Context(), pg.DSN())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(p.Close)
				return NewPostgres(p)
			}
		}},
		{"MariaDB", func(t *testing.T) func() *Store {
			m := sqltest.StartMariaDB(t)
			return func() *Store {
				d, err := sql.Open("mysql", m.DSN())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { d.Close() })
				return NewMySQL(d)
			}
		}},
	} {
		t.Run(db.name, func(t *testing.T) {
			open := db.start(t)
			s := open()
			c := &counted{dialect: s.db, fastPath: s.db.(fastPath)}
			s.db = c
			lc := distlock.New(s, distlock.WithLogger(nil))
			defer lc.Close()
			other := distlock.New(open(), distlock.WithLogger(nil))
			defer other.Close()
			pair := func() *distlock.Lease {
				l, err := lc.Mutex("fast").Lock(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			l := pair() // makes the row: the general way
			if err := l.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
			before := c.begun.Load()
			l = pair()
			if err := l.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
			if n := c.begun.Load() - before; n != 0 {
				t.Fatalf("an uncontended Lock and Unlock began %d transactions, want 0", n)
			}
			l = pair()
			if _, err := other.Mutex("fast").TryLock(t.Context()); !errors.Is(err, distlock.ErrNotAcquired) {
				t.Fatalf("another client's TryLock of a lock taken the fast way: %v", err)
			}
			if err := l.Unlock(t.Context()); err != nil { // the general way: a refused caller may wait
				t.Fatal(err)
			}
			l2, err := other.Mutex("fast").TryLock(t.Context())
			if err != nil {
				t.Fatalf("after the fast release: %v", err)
			}
			if l2.Token() <= l.Token() {
				t.Fatalf("token %d after %d", l2.Token(), l.Token())
			}
			if err := l2.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRefusalsAreReads: on PostgreSQL, once a refused caller has marked
// the lock's release as to be told, further refusals by the same holder
// begin no transaction (they are read from the committed row), and the
// release still wakes the waiter.
func TestRefusalsAreReads(t *testing.T) {
	pg := sqltest.StartPostgres(t)
	open := func() *Store {
		p, err := pgxpool.New(t.Context(), pg.DSN())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return NewPostgres(p)
	}
	holder := distlock.New(open(), distlock.WithLogger(nil))
	defer holder.Close()
	s := open()
	c := &counted{dialect: s.db, fastPath: s.db.(fastPath)}
	s.db = countedListener{c, s.db.(listener)}
	if _, ok := s.db.(listener); !ok {
		t.Fatal("the counted store does not listen")
	}
	other := distlock.New(s, distlock.WithLogger(nil))
	defer other.Close()

	l, err := holder.Mutex("busy").Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Mutex("busy").TryLock(t.Context()); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryLock of a held lock: %v", err)
	}
	before := c.begun.Load()
	for range 3 {
		if _, err := other.Mutex("busy").TryLock(t.Context()); !errors.Is(err, distlock.ErrNotAcquired) {
			t.Fatalf("TryLock of a held lock: %v", err)
		}
	}
	if n := c.begun.Load() - before; n != 0 {
		t.Fatalf("three refusals began %d transactions, want 0", n)
	}
	got := make(chan error, 1)
	go func() {
		l2, err := other.Mutex("busy").Lock(t.Context())
		if err == nil {
			err = l2.Unlock(context.Background())
		}
		got <- err
	}()
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	awaitWoken(t, got)
}

// TestToldReleaseIsFast: on PostgreSQL, the release of a mutex whose
// release is to be told (a refused caller waits) is one statement too (no
// transaction begun) that wakes the waiter, and the release of one nobody
// waits for sends no notice.
func TestToldReleaseIsFast(t *testing.T) {
	pg := sqltest.StartPostgres(t)
	pool := func() *pgxpool.Pool {
		p, err := pgxpool.New(t.Context(), pg.DSN())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return p
	}
	ctx := t.Context()
	hs := NewPostgres(pool())
	c := &counted{dialect: hs.db, fastPath: hs.db.(fastPath)}
	hs.db = countedListener{c, hs.db.(listener)}
	holder := distlock.New(hs, distlock.WithLogger(nil))
	defer holder.Close()
	ws := NewPostgres(pool())
	other := distlock.New(ws, distlock.WithLogger(nil))
	defer other.Close()

	// A listener of the store's channel, to count its notices.
	lp := pool()
	lc, err := lp.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Release()
	if _, err := lc.Exec(ctx, `LISTEN distlock_locks`); err != nil {
		t.Fatal(err)
	}
	// notices returns the notices sent since the last call: it sends one
	// of its own, and takes the store's that come before it.
	notices := func() int {
		if _, err := lp.Exec(ctx, `SELECT pg_notify('distlock_locks', 'end')`); err != nil {
			t.Fatal(err)
		}
		for n := 0; ; n++ {
			m, err := lc.Conn().WaitForNotification(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if m.Payload == "end" {
				return n
			}
		}
	}

	for range 2 { // the first makes the row, the general way
		l, err := holder.Mutex("busy").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	notices()
	l, err := holder.Mutex("busy").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before := c.begun.Load()
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n := c.begun.Load() - before; n != 0 {
		t.Fatalf("the release of a lock nobody waited for began %d transactions, want 0", n)
	}
	if n := notices(); n != 0 {
		t.Fatalf("the release of a lock nobody waited for sent %d notices, want 0", n)
	}

	l, err = holder.Mutex("busy").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Mutex("busy").TryLock(ctx); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryLock of a held lock: %v", err) // marks the release as to be told
	}
	got := make(chan error, 1)
	go func() {
		l2, err := other.Mutex("busy").Lock(ctx)
		if err == nil {
			err = l2.Unlock(context.Background())
		}
		got <- err
	}()
	waits := func() bool {
		ws.hub.mu.Lock()
		defer ws.hub.mu.Unlock()
		return len(ws.hub.wakers["busy"]) > 0
	}
	for !waits() { // the other Client's Lock was refused, and waits
		select {
		case err := <-got:
			t.Fatalf("the other Client's Lock of a held lock returned: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	notices()
	before = c.begun.Load()
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n := c.begun.Load() - before; n != 0 {
		t.Fatalf("the release of a lock waited for began %d transactions, want 0", n)
	}
	awaitWoken(t, got)
}

// awaitWoken waits for the outcome of a waiter's Lock on got: its holder's
// lease is 30 s, so a release that did not tell it would leave it waiting
// past the 20 s given here.
func awaitWoken(t *testing.T, got <-chan error) {
	t.Helper()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the waiter was not woken by the release")
	}
}
