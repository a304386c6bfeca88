package distlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
)

// A single Redis restarted after a crash (SIGKILL): with AOF and
// appendfsync always, the lock and the fencing counter come back with the
// data, the holder keeps renewing it, and nobody else gets it meanwhile;
// without persistence the lock is gone, another client takes it with a
// higher token (tokens are never below the server clock), and the holder's
// next renewal finds it gone: its lease context ends with ErrLockLost.
func TestRestartWithAndWithoutAOF(t *testing.T) {
	for _, aof := range []bool{true, false} {
		name := map[bool]string{true: "aof-always", false: "no-persistence"}[aof]
		t.Run(name, func(t *testing.T) {
			var opts []redistest.Option
			if aof {
				opts = append(opts, redistest.WithArgs("--appendonly", "yes", "--appendfsync", "always"))
			}
			srv := redistest.Start(t, opts...)
			ctx := testCtx(t)
			ev := newEvents()
			holder, _ := newClient(t, srv, distlock.WithEventHandler(ev.handle))
			other, _ := newClient(t, srv)
			a, err := holder.Mutex("restart", distlock.WithTTL(3*time.Second)).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
			// The fencing counter comes back with the data, holding the
			// holder's token (tokens would increase without it: they are
			// never below the server's time in µs).
			fence, ferr := srv.Client(t).Get(ctx, redisstore.DefaultPrefix+"{restart}:fence").Uint64()
			if aof && (ferr != nil || fence != a.Token()) {
				t.Fatalf("the fencing counter after a restart with AOF: %d, %v; want the holder's token %d", fence, ferr, a.Token())
			}
			b, err := other.Mutex("restart").TryLock(ctx)
			if aof {
				if !errors.Is(err, distlock.ErrNotAcquired) || errors.Is(err, distlock.ErrBackend) {
					t.Fatalf("TryLock after a restart with AOF: %v, %v; want ErrNotAcquired (the lock came back)", b, err)
				}
				renewed := ev.count(distlock.EventRenewed)
				ev.await(distlock.EventRenewed, renewed+2)
				if a.Context().Err() != nil || ev.count(distlock.EventLost) != 0 {
					t.Fatalf("the holder lost a lock that the restart kept: %v", context.Cause(a.Context()))
				}
				if err := a.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
				if b, err = other.Mutex("restart").Lock(ctx); err != nil {
					t.Fatal(err)
				}
			} else {
				if err != nil {
					t.Fatalf("TryLock after a restart without persistence: %v; want the lock (it was lost)", err)
				}
				ev.await(distlock.EventLost, 1)
				if cause := context.Cause(a.Context()); !errors.Is(cause, distlock.ErrLockLost) {
					t.Fatalf("the holder's lease context: %v, want ErrLockLost", cause)
				}
			}
			if b.Token() <= a.Token() {
				t.Fatalf("token after the restart %d is not above %d", b.Token(), a.Token())
			}
			if err := b.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
