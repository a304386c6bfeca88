package safety

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
	"github.com/redis/go-redis/v9"
)

// aclRules is the smallest ACL under which a distlock application works
// on a standalone Redis 7.0 with the default prefix, found by experiment:
// TestACLMinimalUser shows it is enough and TestACLEachRuleNeeded that no
// rule can go. As a command:
//
//	ACL SETUSER locker reset on >PASSWORD ~distlock:* &distlock:* +evalsha +eval
//	  +hget +hset +hsetnx +hincrby +hdel +hmget +del +exists +pexpire +pttl +get
//	  +set +time +publish +subscribe +unsubscribe +pubsub|numsub +scan
//
// reset starts from no keys, no channels and -@all. HELLO (sent by
// go-redis on connect) needs no grant; CLIENT SETINFO is refused on 7.0
// whatever the ACL and go-redis ignores that. Optional: +info (distlock
// uses it to refuse servers older than 6.2, and trusts the server when it
// is refused) and +ping (go-redis pings an idle subscription every 3 s and
// ignores a refusal). Scripts are checked command by command against the
// same ACL, so the user cannot touch keys outside its prefix even through
// them.
var aclRules = []string{
	"~distlock:*", "&distlock:*",
	"+evalsha", "+eval",
	"+hget", "+hset", "+hsetnx", "+hincrby", "+hdel", "+hmget", "+del", "+exists", "+pexpire", "+pttl",
	"+get", "+set", "+time", "+publish",
	"+subscribe", "+unsubscribe", "+pubsub|numsub", "+scan",
}

// aclCommand renders the ACL SETUSER command for user.
func aclCommand(user, password string, rules []string) []any {
	args := []any{"ACL", "SETUSER", user, "reset", "on", ">" + password}
	for _, r := range rules {
		args = append(args, r)
	}
	return args
}

func setACLUser(t *testing.T, admin *redis.Client, user string, rules []string) {
	t.Helper()
	if err := admin.Do(context.Background(), aclCommand(user, "pw-"+user, rules)...).Err(); err != nil {
		t.Fatalf("ACL SETUSER: %v", err)
	}
}

func userClient(t *testing.T, srv *redistest.Server, user string) *redis.Client {
	opt := srv.Options()
	opt.Username, opt.Password = user, "pw-"+user
	opt.MaxRetries = -1
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// eventWaiter turns events into channels a test can wait on.
type eventWaiter struct {
	ch map[distlock.EventKind]chan distlock.Event
}

func newEventWaiter() *eventWaiter {
	w := &eventWaiter{ch: map[distlock.EventKind]chan distlock.Event{}}
	for k := distlock.EventAcquired; k <= distlock.EventReleased; k++ {
		w.ch[k] = make(chan distlock.Event, 1000)
	}
	return w
}

func (w *eventWaiter) handle(e distlock.Event) {
	select {
	case w.ch[e.Kind] <- e:
	default:
	}
}

// aclWorkload does everything an application does with distlock, as user:
// lock, re-enter, renew, wait and be woken by a release (the holder's lease
// is long, so only the notification can wake the waiter in time), inspect,
// list, force-unlock, and all of it after SCRIPT FLUSH. It returns the
// first failure.
func aclWorkload(t *testing.T, srv *redistest.Server, admin *redis.Client, user, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := admin.ScriptFlush(ctx).Err(); err != nil {
		return err
	}
	holderEv, waiterEv := newEventWaiter(), newEventWaiter()
	holder := distlock.New(redisstore.New(userClient(t, srv, user)), distlock.WithLogger(nil), distlock.WithEventHandler(holderEv.handle))
	defer holder.Close()
	waiter := distlock.New(redisstore.New(userClient(t, srv, user)), distlock.WithLogger(nil), distlock.WithEventHandler(waiterEv.handle))
	defer waiter.Close()

	short, err := holder.Mutex(name+"-renew", distlock.WithTTL(150*time.Millisecond)).Lock(ctx)
	if err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	l, err := holder.Mutex(name, distlock.WithTTL(time.Minute)).Lock(ctx)
	if err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	in, err := holder.Mutex(name).Lock(l.Context())
	if err != nil {
		return fmt.Errorf("re-enter: %w", err)
	}
	if err := in.Unlock(ctx); err != nil {
		return fmt.Errorf("unlock re-entry: %w", err)
	}
	got := make(chan error, 1)
	var woken *distlock.Lease
	go func() {
		wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
		defer wcancel()
		var err error
		woken, err = waiter.Mutex(name, distlock.WithTTL(time.Minute)).Lock(wctx)
		got <- err
	}()
	select {
	case <-waiterEv.ch[distlock.EventWaiting]:
	case err := <-got:
		return fmt.Errorf("waiter: %w", err)
	}
	for i := 0; i < 2; i++ {
		select {
		case <-holderEv.ch[distlock.EventRenewed]:
		case e := <-holderEv.ch[distlock.EventRenewFailed]:
			return fmt.Errorf("renew: %w", e.Err)
		case e := <-holderEv.ch[distlock.EventLost]:
			return fmt.Errorf("renew: %w", e.Err)
		case <-ctx.Done():
			return fmt.Errorf("renew: %w", ctx.Err())
		}
	}
	if err := short.Unlock(ctx); err != nil {
		return fmt.Errorf("unlock renewed: %w", err)
	}
	info, err := holder.Mutex(name).Inspect(ctx)
	if err != nil {
		return fmt.Errorf("inspect: %w", err)
	}
	if !info.Locked || info.Token != l.Token() {
		return fmt.Errorf("inspect: %+v", info)
	}
	names, err := holder.List(ctx, name+"*")
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	if !slices.Contains(names, name) {
		return fmt.Errorf("list: %q", names)
	}
	if err := l.Unlock(ctx); err != nil {
		return fmt.Errorf("unlock: %w", err)
	}
	if err := <-got; err != nil {
		return fmt.Errorf("waiter after the release: %w", err)
	}
	// The waiter left: its subscription must go (UNSUBSCRIBE), or
	// subscriptions pile up and Inspect counts waiters that are gone.
	// Nothing signals the unsubscription: poll, bounded.
	for i := 0; ; i++ {
		info, err := holder.Mutex(name).Inspect(ctx)
		if err != nil {
			return fmt.Errorf("inspect: %w", err)
		}
		if info.Waiters == 0 {
			break
		}
		if i == 100 {
			return fmt.Errorf("inspect: %d waiters after the waiter left", info.Waiters)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if ok, err := holder.Mutex(name).ForceUnlock(ctx); err != nil || !ok {
		return fmt.Errorf("force-unlock: %v, %w", ok, err)
	}
	if err := woken.Unlock(ctx); !errors.Is(err, distlock.ErrLockLost) {
		return fmt.Errorf("unlock after a force-unlock: %v", err)
	}
	return nil
}

// The minimal user can do everything, and is refused, with NOPERM wrapped
// in ErrBackend, for a lock under another prefix.
func TestACLMinimalUser(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(t)
	setACLUser(t, admin, "locker", aclRules)
	if err := aclWorkload(t, srv, admin, "locker", "acl"); err != nil {
		t.Fatalf("workload under the minimal ACL: %v", err)
	}
	ctx := testCtx(t)
	other := distlock.New(redisstore.New(userClient(t, srv, "locker"), redisstore.WithPrefix("billing:")), distlock.WithLogger(nil))
	defer other.Close()
	for what, call := range map[string]func() error{
		"TryLock": func() error { _, err := other.Mutex("x").TryLock(ctx); return err },
		"Lock":    func() error { _, err := other.Mutex("x").Lock(ctx); return err },
		"Inspect": func() error { _, err := other.Mutex("x").Inspect(ctx); return err },
		"Force":   func() error { _, err := other.Mutex("x").ForceUnlock(ctx); return err },
	} {
		err := call()
		if !errors.Is(err, distlock.ErrBackend) || errors.Is(err, distlock.ErrNotAcquired) || !strings.Contains(err.Error(), "NOPERM") {
			t.Errorf("%s outside the user's prefix: %v; want NOPERM wrapped in ErrBackend", what, err)
		}
	}
	if n, _ := admin.Keys(ctx, "billing:*").Result(); len(n) != 0 {
		t.Errorf("refused calls wrote %q", n)
	}
	// INFO is optional: the same user with it works too.
	setACLUser(t, admin, "locker-info", append(slices.Clone(aclRules), "+info"))
	if err := aclWorkload(t, srv, admin, "locker-info", "acl-info"); err != nil {
		t.Fatalf("workload with +info: %v", err)
	}
}

// Without any one rule of aclRules, something breaks.
func TestACLEachRuleNeeded(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(t)
	for i, rule := range aclRules {
		t.Run(rule, func(t *testing.T) {
			t.Parallel()
			user := "u" + strconv.Itoa(i)
			rules := slices.Delete(slices.Clone(aclRules), i, i+1)
			setACLUser(t, admin, user, rules)
			err := aclWorkload(t, srv, admin, user, "acl-"+strconv.Itoa(i))
			if err == nil {
				t.Fatalf("the workload works without %s: the rule is not needed", rule)
			}
			t.Logf("without %s: %v", rule, err)
		})
	}
	// The optional rules really are optional: without +ping an idle
	// subscription (pinged every 3 s) stays up, and without +info the
	// version check is skipped (TestACLMinimalUser).
	t.Run("+ping optional", func(t *testing.T) {
		t.Parallel()
		setACLUser(t, admin, "no-ping", aclRules)
		if n := idleSubscriptionRedials(t, srv, admin, "no-ping", "acl-ping"); n != 0 {
			t.Fatalf("without +ping the idle subscription was redialled %d times", n)
		}
	})
}

// idleSubscriptionRedials keeps a waiter subscribed and idle for 4.5 s (go-redis
// pings an idle subscription every 3 s) and counts the subscription
// connections the user's client opened meanwhile beyond the first.
func idleSubscriptionRedials(t *testing.T, srv *redistest.Server, admin *redis.Client, user, name string) int {
	ctx := testCtx(t)
	holder := distlock.New(redisstore.New(admin), distlock.WithLogger(nil))
	defer holder.Close()
	l, err := holder.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	ev := newEventWaiter()
	rdb := userClient(t, srv, user)
	dials := 0
	rdb.AddHook(dialCounter{&dials})
	w := distlock.New(redisstore.New(rdb), distlock.WithLogger(nil), distlock.WithEventHandler(ev.handle))
	defer w.Close()
	wctx, cancel := context.WithTimeout(ctx, 4500*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := w.Mutex(name).Lock(wctx); done <- err }()
	select {
	case <-ev.ch[distlock.EventWaiting]:
	case err := <-done:
		t.Fatalf("waiter: %v", err)
	}
	base := dialsNow(&dials)
	if err := <-done; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiter: %v", err)
	}
	return dialsNow(&dials) - base
}

func without(rules []string, rule string) []string {
	return slices.DeleteFunc(slices.Clone(rules), func(r string) bool { return r == rule })
}

// A release script that fails part-way (here the ACL refuses DEL; scripts
// do not roll back) must not leave a lock that Unlock reported released and
// the watchdog goes on renewing: Unlock fails, and renewals stop. Found by
// this suite (docs/safety.md, bug 2).
func TestUnlockRefusedMidScriptStopsRenewal(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(t)
	setACLUser(t, admin, "nodel", without(aclRules, "+del"))
	ev := newEventWaiter()
	c := distlock.New(redisstore.New(userClient(t, srv, "nodel")), distlock.WithLogger(nil), distlock.WithEventHandler(ev.handle))
	defer c.Close()
	ctx := testCtx(t)
	l, err := c.Mutex("stuck", distlock.WithTTL(200*time.Millisecond)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = l.Unlock(ctx)
	if err == nil {
		t.Errorf("Unlock returned nil although its DEL was refused")
	}
	for len(ev.ch[distlock.EventRenewed]) > 0 {
		<-ev.ch[distlock.EventRenewed]
	}
	select {
	case e := <-ev.ch[distlock.EventRenewed]:
		t.Errorf("the watchdog renews the lock after Unlock returned %v: %+v; hash %v", err, e, admin.HGetAll(ctx, "distlock:{stuck}").Val())
	case <-time.After(time.Second): // five renewal periods
	}
}

// When the ACL refuses the subscription (no +subscribe, or no &distlock:*
// channel pattern), a waiting Lock fails at once with ErrBackend wrapping the
// NOPERM, not with a timeout. Found by this suite (bug 5).
func TestSubscribeRefusedIsErrBackend(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(t)
	setACLUser(t, admin, "nosub", without(aclRules, "+subscribe"))
	holder := distlock.New(redisstore.New(admin), distlock.WithLogger(nil))
	defer holder.Close()
	ctx := testCtx(t)
	l, err := holder.Mutex("sub").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	w := distlock.New(redisstore.New(userClient(t, srv, "nosub")), distlock.WithLogger(nil))
	defer w.Close()
	_, err = w.Mutex("sub").Lock(context.Background())
	if !errors.Is(err, distlock.ErrBackend) || !strings.Contains(fmt.Sprint(err), "NOPERM") {
		t.Errorf("Lock with SUBSCRIBE refused: %v; want ErrBackend wrapping NOPERM", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Lock with a context without deadline failed with context.DeadlineExceeded: %v", err)
	}
}
