package redlock

import (
	"context"
	"fmt"
	"time"

	"github.com/distlock/distlock/internal/engine"
	"github.com/distlock/distlock/internal/redisbackend"
)

// Unsupported is the error of a request for a kind of lock other than a
// plain mutex: queues, shared holders and announcements live on one store,
// and a quorum of independent stores does not keep them in one order.
func Unsupported(kind engine.Kind) error {
	return fmt.Errorf("%w: %s over Redlock: only the plain mutex (and MultiMutex) is safe over a quorum of independent masters",
		engine.ErrUnsupported, kindName(kind))
}

func kindName(k engine.Kind) string {
	switch k {
	case engine.Fair:
		return "a fair mutex"
	case engine.Read, engine.Write:
		return "a read-write lock"
	case engine.Semaphore:
		return "a semaphore"
	case engine.Election:
		return "an election"
	}
	return "this kind of lock"
}

// errOnce is the error of Once over Redlock: its record would live on one
// node, not on a quorum.
var errOnce = fmt.Errorf("%w: Once over Redlock: its record of done jobs would not be kept by a quorum", engine.ErrUnsupported)

// CheckOnce, RecordOnce and ForgetOnce refuse: see errOnce.
func (b *Backend) CheckOnce(context.Context, string, time.Duration) (uint64, redisbackend.Record, bool, error) {
	return 0, redisbackend.Record{}, false, errOnce
}

func (b *Backend) RecordOnce(context.Context, string, redisbackend.Record, time.Duration) (bool, error) {
	return false, errOnce
}

func (b *Backend) ForgetOnce(context.Context, string) (bool, error) {
	return false, errOnce
}

// SetPermits refuses: semaphores are not supported.
func (b *Backend) SetPermits(context.Context, string, int) (int, int, error) {
	return 0, 0, Unsupported(engine.Semaphore)
}

// WatchLeader refuses: elections are not supported.
func (b *Backend) WatchLeader(context.Context, string, func(redisbackend.Announcement, bool)) (func(), error) {
	return nil, Unsupported(engine.Election)
}
