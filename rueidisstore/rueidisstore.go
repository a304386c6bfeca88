// Package rueidisstore keeps distlock's locks in Redis through a rueidis
// client (github.com/redis/rueidis): the same locks, scripts, keys and
// guarantees as redisstore's on go-redis, so that clients of both share
// locks. It lives in a module of its own: go-redis users never build
// rueidis.
//
//	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"localhost:6379"}})
//	...
//	c := distlock.New(rueidisstore.New(client))
//	defer c.Close()
//
// A standalone server and a Sentinel deployment (rueidis.SentinelOption)
// are served. A Cluster client is refused: every operation fails with an
// error wrapping ErrUnsupported, because rueidis does not say which
// master serves a key, which the store needs to renew each master's locks
// on their own (a master that does not answer must not hold up the
// renewals of the others) and to send WAIT to the right master under
// replica acknowledgement.
//
// A store does not contact Redis until it is used, and never closes the
// client it is given: close it after the distlock Client. Redis 6.2 or
// later is required.
package rueidisstore

import (
	"fmt"

	"github.com/distlock/distlock/internal/redisbackend"
	"github.com/distlock/distlock/internal/redisopt"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/store"
	"github.com/redis/rueidis"
)

// New returns a store on client, a standalone or Sentinel rueidis client,
// with the options of redisstore (WithPrefix, WithFenceRetention,
// WithReplicaAck). It serves every kind of lock and every operation of
// distlock, as redisstore.New does. A nil client, a Cluster client or an
// invalid option do not panic: every operation of a Client on the store
// then returns an error wrapping store.ErrInvalidOption (a nil client,
// invalid options) or store.ErrUnsupported (a Cluster client).
func New(client rueidis.Client, opts ...redisstore.Option) store.Store {
	o := redisopt.Apply(opts)
	switch {
	case client == nil:
		o.Fail(fmt.Errorf("%w: nil rueidis client", store.ErrInvalidOption))
	case client.Mode() == rueidis.ClientModeCluster:
		o.Fail(fmt.Errorf("%w: a rueidis Cluster client (use redisstore with a go-redis ClusterClient)", store.ErrUnsupported))
	}
	if o.Err != nil {
		return redisopt.Invalid(o.Err)
	}
	return redisbackend.New(newConn(client), o.Backend())
}
