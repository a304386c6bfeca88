package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/distlock/distlock"
)

var unlockCommand = &command{
	name:     "unlock",
	synopsis: "--force [flags] NAME",
	summary:  "release a lock whoever holds it (operators only)",
	doc: `Unlock --force deletes the lock NAME whoever holds it: every reader of a
read-write lock, or its writer; every holder of a semaphore, whose
permits are then all free; an election's leader. A plain lock's waiters
are woken to race for it; a fair lock goes to the first live waiter in
its queue, if any, and the others keep their places; a read-write lock
goes to the first writer in its queue, or to the readers ahead of it; a
semaphore's permits go to the waiters at the head of its queue, as many
as they fit; an election is led by the first live candidate in its
queue, if any. It is for operators, to free a lock whose holder is
stuck. The holders are not stopped: each learns of the release only at
its next lease renewal (within a third of its TTL), when "distlock run"
stops its command; until then more processes than the lock admits may
believe they hold it. Fencing tokens protect the resources that check
them. For a fair or read-write lock, a semaphore or an election, unlock
says who holds it afterwards, if anyone does.

Unlock refuses to run without --force (exit status 64). Unlocking a lock
that is not held is not an error.
`,
	examples: `  distlock status nightly-report     # see who holds it first
  distlock unlock --force nightly-report
`,
	setup: func(fs *flag.FlagSet) func(commandLine) error {
		rf := addRedisFlags(fs)
		force := fs.Bool("force", false, "really release the lock")
		return func(line commandLine) error {
			if len(line.args) != 1 {
				return usageErrorf("want one lock NAME (see distlock unlock --help)")
			}
			if !*force {
				return usageErrorf("refusing to release %q without --force: its holder keeps running (see distlock unlock --help)", line.args[0])
			}
			if err := checkName(line.args[0]); err != nil {
				return err
			}
			return forceUnlock(rf, line.args[0])
		}
	},
}

// forceUnlock releases the lock name whoever holds it.
func forceUnlock(rf *redisFlags, name string) error {
	ctx := context.Background()
	s, err := newSession(rf)
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.ready(ctx, s.client.Mutex(name)); err != nil {
		return err
	}
	// The holders are read first only to say whom the lock was taken from.
	v, err := s.inspect(ctx, name)
	if err != nil {
		return s.failure(err)
	}
	var held bool
	if v.kind == kindRW {
		held, err = s.client.RWMutex(name).ForceUnlock(ctx)
	} else {
		held, err = s.client.Mutex(name).ForceUnlock(ctx)
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
	if v.kind == kindFair || v.kind == kindRW || v.kind == kindSemaphore || v.kind == kindElection {
		msg += nextHolders(ctx, s, name, v)
	}
	fmt.Fprintln(os.Stdout, msg)
	return nil
}

// holders says who holds the lock of v, after "held": "by web-1/4242,
// token 17", "exclusively by ...", "shared by 2 readers: web-1/4242 token
// 17, web-2/77 token 18", "with 3/4 permits in use by 2 holders:
// web-1/4242 token 17 (2 permits), web-2/77 token 18 (1 permit)".
func holders(v lockView) string {
	switch v.kind {
	case kindSemaphore:
		return semHolders(v.sem)
	case kindRW:
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
func nextHolders(ctx context.Context, s *session, name string, v lockView) string {
	now, err := s.inspect(ctx, name)
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

// tokens returns the tokens of the holders of the lock of v.
func tokens(v lockView) []uint64 {
	switch {
	case v.kind == kindSemaphore:
		var ts []uint64
		for _, h := range v.sem.Holders {
			ts = append(ts, h.Token)
		}
		return ts
	case v.kind != kindRW:
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
