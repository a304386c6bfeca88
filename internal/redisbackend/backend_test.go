package redisbackend

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/redistest"
	"github.com/distlock/distlock/store"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newBackend(t *testing.T) *Backend { return newBackendRetention(t, time.Minute) }

// newBackendRetention returns a backend on a server of its own, with the
// fence retention retention.
func newBackendRetention(t *testing.T, retention time.Duration) *Backend {
	srv := redistest.Start(t)
	b := New(GoRedis(srv.Client(t)), Config{Keys: Keys{Prefix: "t:"}, FenceRetention: retention, Host: "h", PID: 7})
	t.Cleanup(func() { b.Close() })
	return b
}

// A release retried after its reply was lost never removes a second hold,
// and never touches another owner's lock.
func TestReleaseIsIdempotent(t *testing.T) {
	b := newBackend(t)
	ctx := t.Context()
	r1 := store.Request{Name: "idem", Owner: "o1", Hold: 1, Lease: time.Minute}
	r2 := r1
	r2.Hold, r2.Reenter = 2, true
	for _, r := range []store.Request{r1, r2, r2} { // the repeated acquire is idempotent too
		g, err := b.Acquire(ctx, r)
		if err != nil || !g.Acquired {
			t.Fatalf("Acquire %+v = %+v, %v", r, g, err)
		}
	}
	st, err := b.Inspect(ctx, "idem")
	if err != nil || st.Holder().Holds != 2 {
		t.Fatalf("holds after 2 holds (one acquired twice) = %+v, %v", st, err)
	}
	for i, want := range []store.Release{store.Remaining, store.AlreadyReleased, store.AlreadyReleased} {
		got, err := b.Release(ctx, r2)
		if err != nil || got != want {
			t.Fatalf("release %d of hold 2 = %v, %v; want %v", i, got, err, want)
		}
	}
	if st, _ := b.Inspect(ctx, "idem"); !st.Locked() || st.Holder().Holds != 1 {
		t.Fatalf("after repeated releases of hold 2: %+v, want 1 hold left", st)
	}
	stranger := store.Request{Name: "idem", Owner: "o2", Hold: 1}
	if got, err := b.Release(ctx, stranger); err != nil || got != store.NotOwner {
		t.Fatalf("release by a stranger = %v, %v; want NotOwner", got, err)
	}
	if got, err := b.Release(ctx, r1); err != nil || got != store.Freed {
		t.Fatalf("last release = %v, %v; want Freed", got, err)
	}
	if got, err := b.Release(ctx, r1); err != nil || got != store.NotOwner {
		t.Fatalf("repeated last release = %v, %v; want NotOwner", got, err)
	}
}

// A token is the larger of the fence counter + 1 and the server time in
// µs, exactly: a counter ahead of the clock (near 2^53, more digits than
// %.14g keeps) counts on by one with no float formatting on the way; a
// counter behind the clock (a replica promoted before the last tokens
// reached it) and a missing one (expired, lost) both start again at the
// server time, above every earlier token.
func TestTokensExact(t *testing.T) {
	b := newBackend(t)
	ctx := t.Context()
	const big = 8_000_000_000_000_001 // odd, below 2^53, far ahead of the clock
	fence := b.cfg.Keys.Fence("tok")
	if err := rdbOf(b).Set(ctx, fence, big, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	r := store.Request{Name: "tok", Owner: "o", Hold: 1, Lease: time.Minute}
	for i := uint64(1); i <= 3; i++ {
		g, err := b.Acquire(ctx, r)
		if err != nil || !g.Acquired || g.Token != big+i {
			t.Fatalf("acquisition %d = %+v, %v; want token %d", i, g, err, uint64(big)+i)
		}
		if st, err := b.Inspect(ctx, "tok"); err != nil || st.Holder().Token != big+i || st.LastToken != big+i {
			t.Fatalf("state after acquisition %d = %+v, %v", i, st, err)
		}
		if res, err := b.Release(ctx, r); err != nil || res != store.Freed {
			t.Fatalf("release = %v, %v", res, err)
		}
	}
	before := uint64(time.Now().UnixMicro())
	for _, behind := range []bool{true, false} {
		if behind { // a counter far behind the clock
			if err := rdbOf(b).Set(ctx, fence, 1000, time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
		} else if err := rdbOf(b).Del(ctx, fence).Err(); err != nil { // the counter expired, or was lost
			t.Fatal(err)
		}
		g, err := b.Acquire(ctx, r)
		now := uint64(time.Now().UnixMicro())
		if err != nil || !g.Acquired || g.Token < before-1_000_000 || g.Token > now+1_000_000 {
			t.Fatalf("acquisition on a counter behind (%v) or missing = %+v, %v; want the server time in µs (~%d)", behind, g, err, now)
		}
		if res, err := b.Release(ctx, r); err != nil || res != store.Freed {
			t.Fatalf("release = %v, %v", res, err)
		}
		if ttl := rdbOf(b).PTTL(ctx, fence).Val(); ttl <= 0 || ttl > time.Minute {
			t.Fatalf("fence counter TTL %v, want (0, 1m]", ttl)
		}
	}
}

// Re-entry never takes a free lock: an owner whose lock expired must not
// get it back under its old token.
func TestReenterNeverTakesFreeLock(t *testing.T) {
	b := newBackend(t)
	g, err := b.Acquire(t.Context(), store.Request{Name: "re", Owner: "o", Hold: 2, Lease: time.Minute, Reenter: true})
	if err != nil || g.Acquired {
		t.Fatalf("re-entry into a free lock = %+v, %v", g, err)
	}
	if st, _ := b.Inspect(t.Context(), "re"); st.Locked() || st.LastToken != 0 {
		t.Fatalf("state after a refused re-entry: %+v", st)
	}
}

// Renewal reports per lock whether it is still owned and never revives a
// lock that is gone.
func TestRenewBatch(t *testing.T) {
	b := newBackend(t)
	ctx := t.Context()
	var reqs []store.Request
	for i := 0; i < 600; i++ { // more than two chunks
		r := store.Request{Name: "r" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Owner: "o", Hold: 1, Lease: time.Minute}
		if i%3 != 2 { // every third lock is not held
			if g, err := b.Acquire(ctx, r); err != nil || !g.Acquired {
				t.Fatal(g, err)
			}
		}
		reqs = append(reqs, r)
	}
	for i := range reqs {
		reqs[i].Seq = 1
	}
	outcomes := renew(t, b, reqs)
	for i, err := range outcomes {
		if held := i%3 != 2; held && err != nil || !held && !errors.Is(err, store.ErrNotHeld) {
			t.Fatalf("lock %d (held %v): %v", i, held, err)
		}
	}
	if n := rdbOf(b).DBSize(ctx).Val(); n != 2*400 { // lock + fence per held lock
		t.Fatalf("%d keys after renewal, want 800: a lock was revived", n)
	}
}

// renew runs one Renew and returns each request's outcome, checking that
// every request is reported exactly once.
func renew(t *testing.T, b *Backend, reqs []store.Request) []error {
	t.Helper()
	out := make([]error, len(reqs))
	seen := make([]int, len(reqs))
	var mu sync.Mutex
	b.Renew(t.Context(), reqs, func(i int, _ store.Grant, err error) {
		mu.Lock()
		defer mu.Unlock()
		out[i] = err
		seen[i]++
	})
	for i, n := range seen {
		if n != 1 {
			t.Fatalf("request %d reported %d times", i, n)
		}
	}
	return out
}

// A renewal that reaches Redis after a later one of the same owner changes
// nothing (superseded), so it can never shorten a lease that a later Extend
// set; a copy of the last applied one is confirmed again.
func TestRenewRefusesOlderSequence(t *testing.T) {
	b := newBackend(t)
	ctx := t.Context()
	r := store.Request{Name: "seq", Owner: "o", Hold: 1, Lease: time.Minute}
	if g, err := b.Acquire(ctx, r); err != nil || !g.Acquired {
		t.Fatal(g, err)
	}
	long := r
	long.Lease, long.Seq = time.Hour, 2
	if err := renew(t, b, []store.Request{long})[0]; err != nil {
		t.Fatal(err)
	}
	old := r
	old.Lease, old.Seq = time.Second, 1
	if err := renew(t, b, []store.Request{old})[0]; !errors.Is(err, store.ErrSuperseded) {
		t.Fatalf("an older renewal: %v, want ErrSuperseded", err)
	}
	if ttl := rdbOf(b).PTTL(ctx, b.cfg.Keys.Lock("seq")).Val(); ttl < time.Minute {
		t.Fatalf("the older renewal shortened the lease to %v", ttl)
	}
	if err := renew(t, b, []store.Request{long})[0]; err != nil {
		t.Fatalf("a copy of the applied renewal: %v, want confirmed", err)
	}
}

// An abandoned owner's acquisition that lands later takes nothing, and
// abandoning a holder frees its lock.
func TestAbandon(t *testing.T) {
	b := newBackend(t)
	ctx := t.Context()
	r := store.Request{Name: "ab", Owner: "gone", Hold: 1, Lease: time.Minute}
	if freed, err := b.Abandon(ctx, r); err != nil || freed {
		t.Fatalf("Abandon of an owner that holds nothing: %v %v", freed, err)
	}
	if g, err := b.Acquire(ctx, r); err != nil || g.Acquired {
		t.Fatalf("an abandoned owner acquired: %+v %v", g, err)
	}
	r2 := store.Request{Name: "ab", Owner: "held", Hold: 1, Lease: time.Minute}
	if g, err := b.Acquire(ctx, r2); err != nil || !g.Acquired {
		t.Fatalf("another owner: %+v %v", g, err)
	}
	if freed, err := b.Abandon(ctx, r2); err != nil || !freed {
		t.Fatalf("Abandon of the holder: %v %v, want freed", freed, err)
	}
	if g, err := b.Acquire(ctx, r2); err != nil || g.Acquired {
		t.Fatalf("the abandoned holder acquired again: %+v %v", g, err)
	}
	for _, k := range rdbOf(b).Keys(ctx, "*abandoned*").Val() {
		if ttl := rdbOf(b).PTTL(ctx, k).Val(); ttl <= 0 || ttl > time.Minute {
			t.Fatalf("abandonment mark %s has TTL %v", k, ttl)
		}
	}
}

// A watch is confirmed before it returns; a release published after it is
// delivered; a stopped watch is unsubscribed.
func TestWatch(t *testing.T) {
	b := newBackend(t)
	ctx := t.Context()
	woke := make(chan struct{}, 1)
	stop, err := b.Watch(ctx, "w", store.Plain, func(store.Notice) { woke <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := b.watchers(ctx, b.cfg.Keys.Channel("w")); n != 1 {
		t.Fatalf("%d subscribers after Watch returned, want 1", n)
	}
	// Its own releases are not delivered (the engine hands them over); those
	// of another client are.
	r := store.Request{Name: "w", Owner: "o", Hold: 1, Lease: time.Minute}
	b.Acquire(ctx, r)
	b.Release(ctx, r)
	other := New(b.conn, b.cfg)
	defer other.Close()
	other.Acquire(ctx, r)
	other.Release(ctx, r)
	<-woke
	select {
	case <-woke:
		t.Fatal("woken by its own release")
	default:
	}
	stop()
	stop() // idempotent
	if err := rdbOf(b).Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
}

func TestWatchAfterClose(t *testing.T) {
	b := newBackend(t)
	b.Close()
	if _, err := b.Watch(t.Context(), "w", store.Plain, func(store.Notice) {}); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Watch after Close = %v, want ErrClosed", err)
	}
}

func TestWatchCancelled(t *testing.T) {
	b := newBackend(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := b.Watch(ctx, "w", store.Plain, func(store.Notice) {}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Watch with a cancelled context = %v", err)
	}
}

func TestSlot(t *testing.T) {
	// Values from the Redis Cluster specification and CLUSTER KEYSLOT.
	if got := crc16("123456789"); got != 0x31C3 {
		t.Fatalf("crc16 = %#x, want 0x31c3", got)
	}
	for key, want := range map[string]string{
		"a{b}c": "b", "{}x": "{}x", "x{": "x{", "plain": "plain", "p:{user}:fence": "user",
	} {
		if got := hashTag(key); got != want {
			t.Errorf("hashTag(%q) = %q, want %q", key, got, want)
		}
	}
	k := Keys{Prefix: "p:"}
	for _, key := range []string{k.Lock("n"), k.Fence("n"), k.Channel("n")} {
		if int(crc16(hashTag(key))%16384) != Slot("n") {
			t.Errorf("%s is not in the lock's slot", key)
		}
	}
}

func TestVersion(t *testing.T) {
	for v, want := range map[string]bool{"7.0.15": true, "6.2.0": true, "6.0.9": false, "5.0.14": false, "10.0.0": true} {
		if got := atLeast(v, MinVersion); got != want {
			t.Errorf("atLeast(%s) = %v", v, got)
		}
	}
	if v := serverVersion("# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n"); v != "7.0.15" {
		t.Errorf("serverVersion = %q", v)
	}
}

// rdbOf returns the go-redis client under b.
func rdbOf(b *Backend) redis.UniversalClient { return b.conn.(*goRedis).rdb }
