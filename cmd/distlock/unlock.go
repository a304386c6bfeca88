package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/distlock/distlock"
)

var unlockCommand = &command{
	name:     "unlock",
	synopsis: "--force [--now] [flags] NAME",
	summary:  "take a lock away from whoever holds it (operators only)",
	doc: `Unlock --force takes the lock NAME away from whoever holds it: every
reader of a read-write lock, or its writer; every holder of a semaphore;
an election's leader. Each holder's process is told at once: "distlock
run" stops its command as on any loss of the lock (SIGTERM to everything
it started, SIGKILL after --kill-grace), then releases the lock; a
program using the library sees its lease context cancelled. Until the
holders have released it the lock stays held, so nobody else starts
while a holder is still stopping; a holder that is dead or cut off from
Redis cannot release it, and the lock then ends with its current lease
(at most --ttl after its last renewal; the holders' renewals are refused
from the moment it is revoked). Unlock waits for that and says how long
it took. Then a plain lock's waiters race for it; a fair lock goes to the
first live waiter in its queue; a read-write lock to the first writer in
its queue, or to the readers ahead of it; a semaphore's permits to the
waiters at the head of its queue, as many as they fit; an election to
the first live candidate in its queue. Unlock says who holds it
afterwards, if anyone does.

With --now the lock is deleted at once instead, and the next holder may
start while the old one is still stopping (or still running, if its
process missed the notice: then it learns of the loss at its next
renewal, within a third of its TTL). Use it only when waiting for the
holder's lease is worse than that overlap. Fencing tokens protect the
resources that check them either way.

Unlock refuses to run without --force (exit status 64). Unlocking a lock
that is not held is not an error. Interrupted while it waits (^C), it
leaves the lock revoked: it ends with its holders' release or lease all
the same.
`,
	examples: `  distlock status nightly-report     # see who holds it first
  distlock unlock --force nightly-report
  distlock unlock --force --now nightly-report   # do not wait for the holder
`,
	setup: func(fs *flag.FlagSet) func(commandLine) error {
		rf := addStoreFlags(fs)
		force := fs.Bool("force", false, "really take the lock away")
		now := fs.Bool("now", false, "delete the lock at once, without waiting for its holders to stop")
		return func(line commandLine) error {
			if len(line.args) != 1 {
				return usageErrorf("want one lock NAME (see distlock unlock --help)")
			}
			if !*force {
				return usageErrorf("refusing to release %q without --force: its holder's work is stopped (see distlock unlock --help)", line.args[0])
			}
			if err := checkName(line.args[0]); err != nil {
				return err
			}
			return forceUnlock(rf, line.args[0], *now)
		}
	},
}

// forceUnlock takes the lock name away from whoever holds it: it revokes
// the lock and waits until its holders have released it, or deletes it at
// once (now).
func forceUnlock(rf *storeFlags, name string, now bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), interruptSignals...)
	defer stop()
	s, err := newSession(rf)
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.ready(ctx, s.client.Mutex(name)); err != nil {
		return err
	}
	// The holders are read first to say whom the lock was taken from, and
	// to know when they are gone.
	v, err := s.inspect(ctx, name)
	if err != nil {
		return s.failure(err)
	}
	began := time.Now()
	var held bool
	switch {
	case now && v.kind == kindRWMutex:
		held, err = s.client.RWMutex(name).ForceUnlock(ctx)
	case now:
		held, err = s.client.Mutex(name).ForceUnlock(ctx)
	default:
		var left time.Duration
		left, err = s.client.Mutex(name).Revoke(ctx)
		held = left > 0
		if err == nil && held {
			err = awaitRelease(ctx, s, name, v, left)
		}
	}
	if err != nil {
		return s.failure(err)
	}
	if !held {
		fmt.Fprintf(os.Stdout, "%s was not locked\n", name)
		return nil
	}
	msg := "released " + name
	if v.locked() {
		msg += " (was held " + holders(v) + ")"
	}
	if v.kind == kindFairMutex || v.kind == kindRWMutex || v.kind == kindSemaphore || v.kind == kindElection {
		msg += nextHolders(ctx, s, name, v)
	}
	fmt.Fprintln(os.Stdout, msg)
	if !now {
		fmt.Fprintf(os.Stderr, "distlock unlock: %s was free %v after its revocation\n", name, time.Since(began).Round(time.Millisecond))
	}
	return nil
}

// awaitRelease waits until none of the holders of v, whose lock name was
// revoked, holds it any more: they released it, or their leases ran out
// (within left, plus a margin for the clocks). The wait is a poll: it is
// an operator's command, and a holder that stops takes far longer than a
// poll's interval.
func awaitRelease(ctx context.Context, s *session, name string, v lockView, left time.Duration) error {
	revoked := tokens(v)
	deadline := time.Now().Add(left + left/10 + time.Second)
	for delay := 5 * time.Millisecond; ; delay = min(2*delay, 100*time.Millisecond) {
		now, err := s.inspect(ctx, name)
		if err == nil && !slices.ContainsFunc(tokens(now), func(t uint64) bool {
			return len(revoked) == 0 || slices.Contains(revoked, t)
		}) {
			return nil
		}
		if ctx.Err() == nil && time.Now().After(deadline) {
			return exitf(exitFailure, "%q is revoked, but still held %v after its holders' leases should have run out", name, time.Since(deadline)+left)
		}
		if err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return exitf(exitSignal+2, "interrupted: %q is revoked and stays held until its holders release it, or for %v at most", name, left)
		case <-time.After(delay):
		}
	}
}

// holders says who holds the lock of v, after "held": "by web-1/4242,
// token 17", "exclusively by ...", "shared by 2 readers: web-1/4242 token
// 17, web-2/77 token 18", "with 3/4 permits in use by 2 holders:
// web-1/4242 token 17 (2 permits), web-2/77 token 18 (1 permit)".
func holders(v lockView) string {
	switch v.kind {
	case kindSemaphore:
		return semHolders(v.sem)
	case kindRWMutex:
		return rwHolders(v.rw)
	case kindElection:
		return fmt.Sprintf("by leader %s, term %d, value %q", holderString(v.mutex.Holder), v.mutex.Token, v.value)
	}
	return fmt.Sprintf("by %s, token %d", holderString(v.mutex.Holder), v.mutex.Token)
}

// rwHolders says who holds the read-write lock of info, after "held".
func rwHolders(info distlock.RWLockInfo) string {
	switch {
	case info.Writer != nil:
		return fmt.Sprintf("exclusively by %s, token %d", holderString(info.Writer.Holder), info.Writer.Token)
	case len(info.Readers) == 1:
		return fmt.Sprintf("shared by %s, token %d", holderString(info.Readers[0].Holder), info.Readers[0].Token)
	}
	readers := make([]string, len(info.Readers))
	for i, r := range info.Readers {
		readers[i] = fmt.Sprintf("%s token %d", holderString(r.Holder), r.Token)
	}
	return fmt.Sprintf("shared by %d readers: %s", len(readers), strings.Join(readers, ", "))
}

// semHolders says who holds the semaphore of info, after "held".
func semHolders(info distlock.SemaphoreInfo) string {
	if len(info.Holders) == 1 {
		h := info.Holders[0]
		return fmt.Sprintf("with %s in use by %s, token %d", permitsInUse(info), holderString(h.Holder), h.Token)
	}
	list := make([]string, len(info.Holders))
	for i, h := range info.Holders {
		list[i] = fmt.Sprintf("%s token %d (%s)", holderString(h.Holder), h.Token, plural(h.Permits, "permit"))
	}
	return fmt.Sprintf("with %s in use by %d holders: %s", permitsInUse(info), len(list), strings.Join(list, ", "))
}

// nextHolders says who holds the fair or read-write lock or the
// semaphore name, which was just released while in the state v, if
// anyone does: the release handed it to the first in its queue. It says nothing if the lock is free, or
// held by an owner of v (the holders that v shows are no longer the
// holders the release removed), or cannot be inspected; the release
// itself succeeded.
//
// A lock whose revoked holder's lease ran out is free until a waiter's
// script notices (the first in line refreshes its place when that lease
// ends): while it is free with waiters queued, nextHolders looks again,
// for grantWait at most.
func nextHolders(ctx context.Context, s *session, name string, v lockView) string {
	deadline := time.Now().Add(grantWait)
	now, err := s.inspect(ctx, name)
	for delay := 5 * time.Millisecond; err == nil && !now.locked() && now.queued() > 0 && time.Now().Before(deadline); delay = min(2*delay, 100*time.Millisecond) {
		select {
		case <-ctx.Done():
			return ""
		case <-time.After(delay):
		}
		now, err = s.inspect(ctx, name)
	}
	if err != nil || !now.locked() || now.kind != v.kind {
		return ""
	}
	before := tokens(v)
	for _, t := range tokens(now) {
		if slices.Contains(before, t) {
			return ""
		}
	}
	return "; now held " + holders(now)
}

// grantWait bounds how long unlock waits for the first waiter of a lock
// left free to be granted it: a place is refreshed a third of its queue
// timeout apart (5 s by default), and at once when the lease before it
// ends.
const grantWait = 2 * time.Second

// tokens returns the tokens of the holders of the lock of v.
func tokens(v lockView) []uint64 {
	switch {
	case v.kind == kindSemaphore:
		var ts []uint64
		for _, h := range v.sem.Holders {
			ts = append(ts, h.Token)
		}
		return ts
	case v.kind != kindRWMutex:
		if v.mutex.Locked {
			return []uint64{v.mutex.Token}
		}
	case v.rw.Writer != nil:
		return []uint64{v.rw.Writer.Token}
	default:
		var ts []uint64
		for _, r := range v.rw.Readers {
			ts = append(ts, r.Token)
		}
		return ts
	}
	return nil
}
