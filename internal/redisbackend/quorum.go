package redisbackend

import (
	"context"
	"fmt"
	"strconv"

	"github.com/distlock/distlock/store"
)

// AcquireToken makes one attempt to take the plain mutex r.Name for
// r.Owner (hold r.Hold, lease r.Lease) with the fencing token token, for a
// node of a Redlock quorum (internal/redlock), where every node must give
// the holder the same token.
//
// The node takes the lock only if token is above its fencing counter, and
// makes token the counter in the same step; an owner that holds the lock
// already, with a lower token, is raised to token. When the lock is free
// but the counter is not below token, nothing changes and counter reports
// the counter: propose a higher token. Otherwise the outcome is Acquire's,
// and so are the abandonment marks: an abandoned owner takes nothing.
func (b *Backend) AcquireToken(ctx context.Context, r store.Request, token uint64) (g store.Grant, counter uint64, err error) {
	if err := b.checkServer(ctx); err != nil {
		return store.Grant{}, 0, err
	}
	res, err := slice(b.pipe.run(ctx, quorumAcquireScript,
		quorumAcquireCall{plainTake: b.plainTake(r), Token: strconv.FormatUint(token, 10)}.args()))
	if err != nil {
		return store.Grant{}, 0, b.backendErr(ctx, err)
	}
	if code, ok := replyInt(res, 0); ok && code == -2 && len(res) == 2 {
		c, err := replyToken(res, 1)
		if err != nil {
			return store.Grant{}, 0, fmt.Errorf("%w: acquire: unexpected reply %v", store.ErrBackend, res)
		}
		return store.Grant{}, c, nil
	}
	g, err = acquireOutcome(res)
	if err != nil && err != store.ErrWrongKind {
		return store.Grant{}, 0, fmt.Errorf("%w: acquire: %w", store.ErrBackend, err)
	}
	return g, 0, err
}
