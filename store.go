package distlock

import (
	"context"
	"time"

	"github.com/distlock/distlock/internal/engine"
	"github.com/distlock/distlock/internal/redisbackend"
)

// A store is where a Client's locks live: one Redis deployment
// (redisbackend.Backend) or a quorum of independent masters
// (redlock.Backend). Beyond the engine's requests, it reads and deletes
// locks for operators, and keeps what the primitives other than locks
// need; a store that cannot keep something refuses with ErrUnsupported.
type store interface {
	engine.Backend
	Inspect(ctx context.Context, name string) (redisbackend.State, error)
	ForceUnlock(ctx context.Context, name string) (bool, error)
	Revoke(ctx context.Context, name string) (time.Duration, error)
	List(ctx context.Context, pattern string) ([]string, error)
	CheckOnce(ctx context.Context, name string, period time.Duration) (now uint64, rec redisbackend.Record, ok bool, err error)
	RecordOnce(ctx context.Context, name string, rec redisbackend.Record, keep time.Duration) (bool, error)
	ForgetOnce(ctx context.Context, name string) (bool, error)
	SetPermits(ctx context.Context, name string, n int) (before, held int, err error)
	WatchLeader(ctx context.Context, name string, fn func(a redisbackend.Announcement, lost bool)) (func(), error)
	Close() error
}
