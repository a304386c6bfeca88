package distlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redistest"
	"github.com/redis/go-redis/v9"
)

// enterNames counts a holder into the guard of each name it holds (a
// counter in Redis per name) and counts an overlap when anyone else was
// inside one of them; leaveNames counts it out.
var (
	enterNames = redis.NewScript(`
for _, k in ipairs(KEYS) do
  if redis.call('INCR', k) > 1 then redis.call('INCR', 'multi:overlaps') end
end`)
	leaveNames = redis.NewScript(`for _, k in ipairs(KEYS) do redis.call('DECR', k) end`)
)

func guarded(ctx context.Context, rdb *redis.Client, names []string, inside func()) error {
	keys := make([]string, len(names))
	for i, n := range names {
		keys[i] = "multi:inside:" + n
	}
	if err := enterNames.Run(ctx, rdb, keys).Err(); err != nil && err != redis.Nil {
		return err
	}
	inside()
	if err := leaveNames.Run(ctx, rdb, keys).Err(); err != nil && err != redis.Nil {
		return err
	}
	return nil
}

// multiRounds is the body of a "multi-rounds" helper process: it takes the
// multi-lock of names (comma-separated, in that order) rounds times, and
// prints "round N" after each.
func multiRounds(ctx context.Context, c *distlock.Client, rdb *redis.Client, names string, rounds int) int {
	m := c.MultiMutex(strings.Split(names, ","), distlock.WithTTL(5*time.Second))
	for i := 0; i < rounds; i++ {
		l, err := m.Lock(ctx)
		if err == nil {
			err = guarded(ctx, rdb, m.Names(), func() { time.Sleep(time.Duration(rand.IntN(1500)) * time.Microsecond) })
		}
		if err == nil {
			err = l.Unlock(ctx)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println("round", i)
	}
	return 0
}

// Two processes take {a, b} and {b, a} over and over while a third takes
// a or b alone at random moments: every round ends (no deadlock), no
// holder overlaps another on any name, and nothing is left held.
func TestMultiOppositeOrdersAcrossProcesses(t *testing.T) {
	srv := redistest.Start(t)
	c, rdb := newClient(t, srv)
	ctx := testCtx(t)
	const rounds = 60
	ab := startHelper(t, "multi-rounds", srv.URL(), "a,b", fmt.Sprint(rounds))
	ba := startHelper(t, "multi-rounds", srv.URL(), "b,a", fmt.Sprint(rounds))
	stop := make(chan struct{})
	plainDone := make(chan error, 1)
	go func() {
		plain := 0
		defer func() { t.Logf("%d plain holds meanwhile", plain) }()
		for {
			select {
			case <-stop:
				plainDone <- nil
				return
			default:
			}
			name := []string{"a", "b"}[rand.IntN(2)]
			l, err := c.Mutex(name, distlock.WithTTL(5*time.Second)).Lock(ctx)
			if err == nil {
				err = guarded(ctx, rdb, []string{name}, func() { time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond) })
			}
			if err == nil {
				err = l.Unlock(ctx)
			}
			if err != nil {
				plainDone <- err
				return
			}
			plain++
			time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
		}
	}()
	for _, h := range []*helper{ab, ba} {
		n := 0
		for line := range h.lines { // "waiting" lines come too
			if strings.HasPrefix(line, "round ") {
				n++
			}
		}
		if err := h.wait(t); err != nil || n != rounds {
			t.Fatalf("multi-lock process: %d rounds of %d, %v", n, rounds, err)
		}
	}
	close(stop)
	if err := <-plainDone; err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.Get(ctx, "multi:overlaps").Int(); n != 0 {
		t.Fatalf("%d overlaps between holders of one name", n)
	}
	for _, name := range []string{"a", "b"} {
		if info, err := c.Mutex(name).Inspect(ctx); err != nil || info.Locked {
			t.Fatalf("%s left held: %+v, %v", name, info, err)
		}
	}
}

// The Lease of a multi-lock covers the set: its tokens, its context (ended
// when any member is lost), its Unlock (every member), re-entry into a
// member with its context; a context that holds a member cannot take the
// multi-lock, and bad lists fail at once.
func TestMultiLease(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	ops, _ := newClient(t, srv)
	ctx := testCtx(t)
	m := c.MultiMutex([]string{"y", "x", "z"}, distlock.WithTTL(time.Second))
	if got := strings.Join(m.Names(), ","); got != "x,y,z" {
		t.Fatalf("Names() = %s", got)
	}
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tokens := l.Tokens()
	most := uint64(0)
	for _, name := range []string{"x", "y", "z"} {
		info, _ := ops.Mutex(name).Inspect(ctx)
		if !info.Locked || info.Token != tokens[name] {
			t.Fatalf("member %s: %+v, token %d in the lease", name, info, tokens[name])
		}
		most = max(most, tokens[name])
	}
	if l.Token() != most || len(tokens) != 3 {
		t.Fatalf("Token() = %d, Tokens() = %v", l.Token(), tokens)
	}
	in, err := c.Mutex("y").Lock(l.Context()) // re-enters the member
	if err != nil || in.Token() != tokens["y"] {
		t.Fatalf("re-entry into a member: %v, %v", in, err)
	}
	in.Unlock(ctx)
	if _, err := c.MultiMutex([]string{"y", "w"}).Lock(l.Context()); !errors.Is(err, distlock.ErrDeadlock) {
		t.Fatalf("a multi-lock with a context that holds a member: %v, want ErrDeadlock", err)
	}
	if _, err := ops.MultiMutex([]string{"w", "z"}).TryLock(ctx); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryLock with a member held: %v", err)
	}
	if info, _ := ops.Mutex("w").Inspect(ctx); info.Locked {
		t.Fatal("a refused TryLock left a member held")
	}
	if ok, err := ops.Mutex("z").ForceUnlock(ctx); !ok || err != nil {
		t.Fatal(ok, err)
	}
	<-l.Context().Done()
	if cause := context.Cause(l.Context()); !errors.Is(cause, distlock.ErrLockLost) {
		t.Fatalf("group context cause: %v, want ErrLockLost", cause)
	}
	if err := l.Unlock(ctx); !errors.Is(err, distlock.ErrLockLost) {
		t.Fatalf("Unlock with a member lost: %v, want ErrLockLost (for that member)", err)
	}
	for _, name := range []string{"x", "y"} {
		if info, _ := ops.Mutex(name).Inspect(ctx); info.Locked {
			t.Fatalf("member %s still held after Unlock", name)
		}
	}
	for what, err := range map[string]error{
		"empty":     c.MultiMutex(nil).Err(),
		"too long":  c.MultiMutex(make([]string, distlock.MaxMembers+1)).Err(),
		"duplicate": c.MultiMutex([]string{"a", "b", "a"}).Err(),
		"bad name":  c.MultiMutex([]string{"a", "b{c}"}).Err(),
	} {
		if !errors.Is(err, distlock.ErrInvalidOption) && !errors.Is(err, distlock.ErrInvalidName) {
			t.Errorf("%s: %v", what, err)
		}
	}
}

// A waiting multi-lock gets the set once the member that refused it is
// released, and a wait that ends (ctx) leaves nothing held.
func TestMultiWaits(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	other, _ := newClient(t, srv)
	ctx := testCtx(t)
	held, err := other.Mutex("q").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := c.MultiMutex([]string{"p", "q"}).Lock(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a wait that ends: %v", err)
	}
	if info, _ := c.Mutex("p").Inspect(ctx); info.Locked {
		t.Fatal("an ended wait left a member held")
	}
	got := make(chan error, 1)
	go func() {
		l, err := c.MultiMutex([]string{"q", "p"}).Lock(ctx)
		if err == nil {
			err = l.Unlock(ctx)
		}
		got <- err
	}()
	waitFor(t, func() bool { info, _ := other.Mutex("q").Inspect(ctx); return info.Waiters == 1 })
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}
