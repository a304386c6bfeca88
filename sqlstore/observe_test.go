package sqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// TestObserveAcrossClients: an observer in another Client follows an
// election's leaders and the vacancy between them, pushed on PostgreSQL
// and polled on MariaDB.
func TestObserveAcrossClients(t *testing.T) {
	databases(t, func(t *testing.T, db database) {
		watcher, a, b := db.client(t), db.client(t), db.client(t)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		seen := watcher.Election("observed").Observe(ctx)
		next := func(what string, want func(distlock.Leader) bool) distlock.Leader {
			t.Helper()
			deadline := time.After(30 * time.Second)
			for {
				select {
				case l, ok := <-seen:
					if !ok {
						t.Fatalf("Observe ended waiting for %s", what)
					}
					if want(l) {
						return l
					}
				case <-deadline:
					t.Fatalf("no %s observed within 30 s", what)
				}
			}
		}
		la, err := a.Election("observed").Campaign(t.Context(), "a")
		if err != nil {
			t.Fatal(err)
		}
		first := next("leader a", func(l distlock.Leader) bool { return l.Value == "a" })
		if first.Term != la.Token() {
			t.Fatalf("observed term %d, a's token %d", first.Term, la.Token())
		}
		if err := a.Election("observed").Resign(t.Context(), la); err != nil {
			t.Fatal(err)
		}
		next("the vacancy", func(l distlock.Leader) bool { return l.Value == "" && l.Term == 0 })
		lb, err := b.Election("observed").Campaign(t.Context(), "b")
		if err != nil {
			t.Fatal(err)
		}
		defer lb.Unlock(context.Background())
		second := next("leader b", func(l distlock.Leader) bool { return l.Value == "b" })
		if second.Term != lb.Token() || second.Term <= first.Term {
			t.Fatalf("observed b's term %d (its token %d) after a's %d", second.Term, lb.Token(), first.Term)
		}
	})
}
