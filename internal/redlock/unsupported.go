package redlock

import (
	"fmt"
	"time"

	"github.com/distlock/distlock/store"
)

// Unsupported is the error of a request for a kind of lock other than a
// plain mutex: queues, shared holders and announcements live on one store,
// and a quorum of independent stores does not keep them in one order.
func Unsupported(kind store.Kind) error {
	return fmt.Errorf("%w: %s over Redlock: only the plain mutex (and MultiMutex) is safe over a quorum of independent masters",
		store.ErrUnsupported, kindName(kind))
}

func kindName(k store.Kind) string {
	switch k {
	case store.Fair:
		return "a fair mutex"
	case store.Read, store.Write:
		return "a read-write lock"
	case store.Semaphore:
		return "a semaphore"
	case store.Election:
		return "an election"
	}
	return "this kind of lock"
}

// Err returns the error New returned: every request fails with it.
func (b *Backend) Err() error { return b.err }

// Validate implements store.Validator: only plain mutexes are served.
func (b *Backend) Validate(kind store.Kind, _, _ time.Duration) error {
	if b.err != nil {
		return b.err
	}
	if kind != store.Plain {
		return Unsupported(kind)
	}
	return nil
}
