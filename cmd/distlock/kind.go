package main

import (
	"context"
	"errors"

	"github.com/distlock/distlock"
)

// A lockKind is the kind of lock a name is in use as. A name is used by
// one kind at a time. The command names each kind as the library does
// (see String).
type lockKind int

const (
	kindNone      lockKind = iota // free, and nobody queues for it: any kind may take it
	kindMutex                     // a mutex: distlock run
	kindFairMutex                 // a fair mutex: distlock run --fair
	kindRWMutex                   // a read-write lock: distlock run --shared or --exclusive
	kindSemaphore                 // a semaphore: distlock run --semaphore N
	kindElection                  // an election: the library's Client.Election; run cannot take it
)

// libraryKinds is the library's Kind of each lockKind, indexed by it.
var libraryKinds = [...]distlock.Kind{
	kindNone:      distlock.KindFree,
	kindMutex:     distlock.KindMutex,
	kindFairMutex: distlock.KindFairMutex,
	kindRWMutex:   distlock.KindRWMutex,
	kindSemaphore: distlock.KindSemaphore,
	kindElection:  distlock.KindElection,
}

// String is the name of the kind in the output of status and list and in
// messages: the library's name of it (distlock.Kind), "mutex",
// "fair-mutex", "rwmutex", "semaphore" or "election"; "" for kindNone.
func (k lockKind) String() string {
	return string(libraryKinds[k])
}

// kindNamed returns the lockKind that the library names kind, and
// whether there is one.
func kindNamed(kind distlock.Kind) (lockKind, bool) {
	for k, lk := range libraryKinds {
		if lk == kind {
			return lockKind(k), true
		}
	}
	return kindNone, false
}

// flags names the kind, with the flags of run that take it, for messages.
func (k lockKind) flags() string {
	switch k {
	case kindMutex:
		return "a mutex (without --fair, --shared, --exclusive or --semaphore)"
	case kindFairMutex:
		return "a fair-mutex (--fair)"
	case kindRWMutex:
		return "an rwmutex (--shared/--exclusive)"
	case kindSemaphore:
		return "a semaphore (--semaphore)"
	case kindElection:
		return "an election (the library's Client.Election, which distlock run does not take)"
	}
	return "no lock"
}

// kindOf returns the kind of lock name is in use as: held, or with
// waiters queued for it (the kind of their places).
func (s *session) kindOf(ctx context.Context, name string) (lockKind, error) {
	info, err := s.client.Mutex(name).Inspect(ctx)
	if err != nil {
		return kindNone, err
	}
	kind, ok := kindNamed(info.Kind)
	if !ok {
		// A kind of lock that this command does not handle (yet).
		return kindNone, exitf(exitFailure, "lock %q is in use as a kind of lock that this distlock does not know (%q)", name, info.Kind)
	}
	return kind, nil
}

// A lockView is the state of a lock of any kind, as status, list and
// unlock show it.
type lockView struct {
	kind  lockKind
	mutex distlock.LockInfo   // unless kind is kindRWMutex or kindSemaphore
	rw    distlock.RWLockInfo // if kind is kindRWMutex
	// sem is the state of a semaphore if kind is kindSemaphore; if kind
	// is kindNone, its Capacity is the one that Redis keeps for the next
	// user of a semaphore of that name, if any.
	sem distlock.SemaphoreInfo
	// value is the value that an election's leader campaigned with, if
	// kind is kindElection (mutex then describes the election, its holder
	// being the leader), and someone leads it.
	value string
}

// locked reports whether anyone holds the lock.
func (v lockView) locked() bool {
	switch v.kind {
	case kindRWMutex:
		return v.rw.Mode != ""
	case kindSemaphore:
		return len(v.sem.Holders) > 0
	}
	return v.mutex.Locked
}

// queued is how many wait in the lock's queue (a fair or read-write lock,
// a semaphore, an election).
func (v lockView) queued() int {
	switch v.kind {
	case kindRWMutex:
		return v.rw.QueuedReaders + v.rw.QueuedWriters
	case kindSemaphore:
		return v.sem.Queued
	}
	return v.mutex.Queued
}

// inspectAttempts bounds how many times inspect reads a lock whose kind
// changes as it reads it.
const inspectAttempts = 3

// inspect reads the state of the lock name, of whatever kind it is. The
// kind and the state are read in two steps, so it reads the kind again
// after the state, and the state again if the kind has changed meanwhile
// (the lock was taken or released).
func (s *session) inspect(ctx context.Context, name string) (lockView, error) {
	kind, err := s.kindOf(ctx, name)
	if err != nil {
		return lockView{}, err
	}
	var v lockView
	for range inspectAttempts {
		v = lockView{kind: kind}
		switch kind {
		case kindRWMutex:
			v.rw, err = s.client.RWMutex(name).Inspect(ctx)
		case kindSemaphore:
			v.sem, err = s.semaphore(name).Inspect(ctx)
		case kindElection:
			v.mutex, v.value, err = s.inspectElection(ctx, name)
		default:
			v.mutex, err = s.client.Mutex(name).Inspect(ctx)
			if err == nil && kind == kindNone {
				// A free name may still have a semaphore's capacity,
				// on a store that keeps semaphores.
				v.sem, err = s.semaphore(name).Inspect(ctx)
				if errors.Is(err, distlock.ErrUnsupported) {
					v.sem, err = distlock.SemaphoreInfo{}, nil
				}
			}
		}
		if err != nil {
			return lockView{}, err
		}
		again, err := s.kindOf(ctx, name)
		if err != nil {
			return lockView{}, err
		}
		if again == kind {
			break
		}
		kind = again
	}
	return v, nil
}

// inspectElection reads the state of the election name, and the value
// that its leader campaigned with, if someone leads it. The value is read
// apart, with Election.Leader: if the leader has changed in between, it
// reads both again; if it keeps changing, the value is left "".
func (s *session) inspectElection(ctx context.Context, name string) (distlock.LockInfo, string, error) {
	var info distlock.LockInfo
	for range inspectAttempts {
		var err error
		info, err = s.client.Mutex(name).Inspect(ctx)
		if err != nil || !info.Locked {
			return info, "", err
		}
		l, err := s.client.Election(name).Leader(ctx)
		switch {
		case err == nil && l.Term == info.Token:
			return info, l.Value, nil
		case err != nil && !errors.Is(err, distlock.ErrNotHeld):
			return distlock.LockInfo{}, "", err
		}
	}
	return info, "", nil
}

// semaphore returns the semaphore name on s, to inspect it or set its
// capacity: its permits argument is not used for those.
func (s *session) semaphore(name string) *distlock.Semaphore {
	return s.client.Semaphore(name, 1)
}
