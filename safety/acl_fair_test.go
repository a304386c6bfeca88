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

// aclFairExtra are the rules a fair mutex needs beyond aclRules, found by
// experiment as aclRules were (TestACLFairUser, TestACLFairEachRuleNeeded):
// the commands of the queue, a sorted set of places and one of their
// deadlines. The grant channels need no rule of their own: they are under
// &distlock:*, and grants are published with PUBLISH. As a command:
//
//	ACL SETUSER locker reset on >PASSWORD ~distlock:* &distlock:* +evalsha +eval
//	  +hget +hset +hsetnx +hincrby +hdel +hmget +del +exists +pexpire +pttl +get
//	  +set +incr +time +publish +subscribe +unsubscribe +pubsub|numsub +scan
//	  +zadd +zrem +zrange +zrangebyscore +zremrangebyscore +zscore
var aclFairExtra = []string{"+zadd", "+zrem", "+zrange", "+zrangebyscore", "+zremrangebyscore", "+zscore"}

// aclFairWorkload does everything an application does with a fair mutex,
// as user: take the lock (after SCRIPT FLUSH), re-enter it, a TryLock
// refused while it is held, a plain Mutex of the name refused with
// ErrWrongKind, a waiter cut off from Redis whose place expires and is
// purged, a waiter that keeps its place with refreshes and is granted the
// lock by the release (over its grant channel), Inspect and List of a fair
// lock, ForceUnlock, and a waiter that gives up. It returns the first
// failure.
func aclFairWorkload(t *testing.T, srv *redistest.Server, admin *redis.Client, user, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := admin.ScriptFlush(ctx).Err(); err != nil {
		return err
	}
	holder := distlock.New(redisstore.New(userClient(t, srv, user)), distlock.WithLogger(nil))
	defer holder.Close()
	// The ghost waits in the queue, but its refreshes never reach Redis.
	gate := &scriptGate{script: "refresh", open: make(chan struct{})}
	grdb := userClient(t, srv, user)
	grdb.AddHook(gate)
	gev := newEventWaiter()
	ghost := distlock.New(redisstore.New(grdb), distlock.WithLogger(nil), distlock.WithEventHandler(gev.handle))
	defer ghost.Close()
	defer gate.release()
	refreshes := &scriptWatch{script: "refresh", ch: make(chan error, 100)}
	wrdb := userClient(t, srv, user)
	wrdb.AddHook(refreshes)
	wev := newEventWaiter()
	waiter := distlock.New(redisstore.New(wrdb), distlock.WithLogger(nil), distlock.WithEventHandler(wev.handle))
	defer waiter.Close()
	fair := func(c *distlock.Client, queue time.Duration) *distlock.Mutex {
		return c.FairMutex(name, distlock.WithTTL(time.Minute), distlock.WithQueueTimeout(queue))
	}

	l, err := fair(holder, time.Minute).Lock(ctx)
	if err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	in, err := fair(holder, time.Minute).Lock(l.Context())
	if err != nil {
		return fmt.Errorf("re-enter: %w", err)
	}
	if err := in.Unlock(ctx); err != nil {
		return fmt.Errorf("unlock re-entry: %w", err)
	}
	if _, err := fair(waiter, time.Second).TryLock(ctx); !errors.Is(err, distlock.ErrNotAcquired) || errors.Is(err, distlock.ErrBackend) {
		return fmt.Errorf("TryLock of a held lock: %v", err)
	}
	if _, err := waiter.Mutex(name).TryLock(ctx); !errors.Is(err, distlock.ErrWrongKind) {
		return fmt.Errorf("plain TryLock of a fair lock: %v", err)
	}

	gctx, gcancel := context.WithCancel(ctx)
	defer gcancel()
	ghostDone := make(chan error, 1)
	go func() {
		_, err := fair(ghost, 200*time.Millisecond).Lock(gctx)
		ghostDone <- err
	}()
	select {
	case <-gev.ch[distlock.EventWaiting]:
	case err := <-ghostDone:
		return fmt.Errorf("ghost waiter: %w", err)
	}
	type result struct {
		l   *distlock.Lease
		err error
	}
	got := make(chan result, 1)
	go func() {
		l, err := fair(waiter, time.Second).Lock(ctx)
		got <- result{l, err}
	}()
	select {
	case <-wev.ch[distlock.EventWaiting]:
	case r := <-got:
		return fmt.Errorf("waiter: %v", r.err)
	}
	// One refresh of the waiter's place goes through (NOSCRIPT after the
	// SCRIPT FLUSH is followed by the same call with EVAL).
	for refreshed := false; !refreshed; {
		select {
		case err := <-refreshes.ch:
			if err != nil && !strings.HasPrefix(err.Error(), "NOSCRIPT") {
				return fmt.Errorf("refresh: %w", err)
			}
			refreshed = err == nil
		case r := <-got:
			return fmt.Errorf("waiter: %v", r.err)
		case <-ctx.Done():
			return fmt.Errorf("no refresh: %w", ctx.Err())
		}
	}
	// Inspect counts the live places only: the ghost's goes when its
	// queue timeout passes (nothing signals it: poll, bounded).
	for i := 0; ; i++ {
		info, err := holder.FairMutex(name).Inspect(ctx)
		if err != nil {
			return fmt.Errorf("inspect: %w", err)
		}
		if !info.Locked || info.Kind != distlock.KindFairMutex || info.Token != l.Token() {
			return fmt.Errorf("inspect: %+v", info)
		}
		if info.Queued == 1 {
			break
		}
		if i == 300 {
			return fmt.Errorf("inspect: %d places, want the waiter's alone", info.Queued)
		}
		time.Sleep(10 * time.Millisecond)
	}
	names, err := holder.List(ctx, name+"*")
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	if !slices.Contains(names, name) {
		return fmt.Errorf("list: %q", names)
	}
	// The release purges the ghost's expired place (if the waiter's
	// refresh has not) and grants the lock to the waiter, inside the
	// release: the lock is held again when Unlock returns.
	if err := l.Unlock(ctx); err != nil {
		return fmt.Errorf("unlock: %w", err)
	}
	info, err := holder.FairMutex(name).Inspect(ctx)
	if err != nil {
		return fmt.Errorf("inspect: %w", err)
	}
	if !info.Locked || info.Token == l.Token() || info.Queued != 0 {
		return fmt.Errorf("after the release: %+v; want the lock granted to the waiter", info)
	}
	r := <-got
	if r.err != nil {
		return fmt.Errorf("waiter after the release: %w", r.err)
	}
	if r.l.Token() != info.Token {
		return fmt.Errorf("the waiter got token %d, the release granted %d", r.l.Token(), info.Token)
	}
	// Every refresh of the waiter went through: a refused one is retried
	// by the engine, and would go unnoticed.
	for len(refreshes.ch) > 0 {
		if err := <-refreshes.ch; err != nil && !strings.HasPrefix(err.Error(), "NOSCRIPT") {
			return fmt.Errorf("refresh: %w", err)
		}
	}
	if ok, err := holder.FairMutex(name).ForceUnlock(ctx); err != nil || !ok {
		return fmt.Errorf("force-unlock: %v, %w", ok, err)
	}
	if err := r.l.Unlock(ctx); !errors.Is(err, distlock.ErrLockLost) {
		return fmt.Errorf("unlock after a force-unlock: %v", err)
	}
	// The ghost gives up (abandon.lua).
	gcancel()
	gate.release()
	if err := <-ghostDone; !errors.Is(err, distlock.ErrNotAcquired) || errors.Is(err, distlock.ErrBackend) {
		return fmt.Errorf("ghost waiter: %v", err)
	}
	if err := ghost.Close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	return nil
}

// The fair user runs the fair workload, and the plain one.
func TestACLFairUser(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(t)
	rules := append(slices.Clone(aclRules), aclFairExtra...)
	setACLUser(t, admin, "fair-locker", rules)
	if err := aclFairWorkload(t, srv, admin, "fair-locker", "acl-fair"); err != nil {
		t.Fatalf("fair workload under the fair ACL: %v", err)
	}
	if err := aclWorkload(t, srv, admin, "fair-locker", "acl-plain"); err != nil {
		t.Fatalf("plain workload under the fair ACL: %v", err)
	}
}

// Without any one of the fair rules, the fair workload breaks. Found by
// running it under aclRules and adding the command each failure named
// (Redis 7.0 names the script's line, not the command): ZRANGEBYSCORE,
// ZRANGE, ZREM, ZSCORE, ZADD; then the release's purge of the
// expired place (ZREMRANGEBYSCORE), whose refusal comes after the release
// deleted the lock: Unlock succeeds, the lock is free and the waiter is
// not served (nor can its refreshes, which purge too, go through).
func TestACLFairEachRuleNeeded(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(t)
	for i, rule := range aclFairExtra {
		t.Run(rule, func(t *testing.T) {
			t.Parallel()
			user := "f" + strconv.Itoa(i)
			setACLUser(t, admin, user, append(slices.Clone(aclRules), without(aclFairExtra, rule)...))
			err := aclFairWorkload(t, srv, admin, user, "acl-fair-"+strconv.Itoa(i))
			if err == nil {
				t.Fatalf("the fair workload works without %s: the rule is not needed", rule)
			}
			t.Logf("without %s: %v", rule, err)
		})
	}
}
