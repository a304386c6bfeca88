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
// A standalone server, a Sentinel deployment (rueidis.SentinelOption)
// and a Cluster are served, as by redisstore on go-redis. On a Cluster the
// store keeps its own map of the slots' masters (CLUSTER SLOTS, read on
// first use and again when a master does not answer or a slot moved):
// rueidis routes commands itself but does not say where, and the store
// renews each master's locks apart (a master that does not answer holds
// up only its own) and sends WAIT to the master of the locks it covers.
//
// NewRedlock is redisstore.NewRedlock over rueidis clients: a lock held
// on a majority of independent masters.
//
// rueidis does not look at an idle connection before it writes on it
// (go-redis's pool does): it finds one the server closed by the PING it
// sends after a second of silence (Dialer.KeepAlive), or by the next
// command written on it, which fails with EOF. So a lock call made just
// after a server restarts may fail so: its outcome is unknown, and
// distlock counts it as possibly applied, cleans up, and returns an
// error wrapping ErrBackend; a call again takes a new connection.
// rueidis.ClientOption.AlwaysPipelining keeps a reader on every
// connection, which then sees its close when it comes.
//
// A store does not contact Redis until it is used, and never closes the
// client it is given: close it after the distlock Client. Redis 6.2 or
// later is required.
package rueidisstore

import (
	"fmt"

	"github.com/distlock/distlock/internal/redisbackend"
	"github.com/distlock/distlock/internal/redisopt"
	"github.com/distlock/distlock/internal/redlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/store"
	"github.com/redis/rueidis"
)

// New returns a store on client, a standalone, Sentinel or Cluster
// rueidis client, with the options of redisstore (WithPrefix,
// WithFenceRetention, WithReplicaAck). It serves every kind of lock and
// every operation of distlock, as redisstore.New does. A nil client or an
// invalid option do not panic: every operation of a Client on the store
// then returns an error wrapping store.ErrInvalidOption.
func New(client rueidis.Client, opts ...redisstore.Option) store.Store {
	o := redisopt.Apply(opts)
	if client == nil {
		o.Fail(fmt.Errorf("%w: nil rueidis client", store.ErrInvalidOption))
	}
	if o.Err != nil {
		return redisopt.Invalid(o.Err)
	}
	return redisbackend.New(newConn(client), o.Backend())
}

// NewRedlock returns a store whose locks are held on a majority of the
// independent Redis masters clients, with the Redlock algorithm, as
// redisstore.NewRedlock does over go-redis clients: an odd number of
// standalone (or Sentinel) rueidis clients, at least 3, one per master.
// It refuses fewer, an even number, one master twice (the same client, or
// two clients of one address), a Cluster client and WithReplicaAck, with
// ErrInvalidOption. It serves what redisstore.NewRedlock serves (Mutex,
// MultiMutex, Inspect, ForceUnlock, Revoke, List) and nothing more.
func NewRedlock(clients []rueidis.Client, opts ...redisstore.Option) store.Store {
	o := redisopt.Apply(opts)
	if o.Replicas > 0 {
		o.Fail(fmt.Errorf("%w: replica acknowledgement with Redlock: each master stands alone, the quorum is what replicates", store.ErrInvalidOption))
	}
	masters := make([]redlock.Master, len(clients))
	for i, client := range clients {
		switch {
		case client == nil:
			continue
		case client.Mode() == rueidis.ClientModeCluster:
			o.Fail(fmt.Errorf("%w: Redlock master %d is a Cluster client: each master must be a standalone or Sentinel one", store.ErrInvalidOption, i))
			continue
		}
		masters[i] = redlock.Master{Conn: newConn(client), ID: client}
		if client.Mode() == rueidis.ClientModeStandalone {
			for addr := range client.Nodes() { // a standalone client has one node: its server
				masters[i].Addr, masters[i].ID = addr, "tcp://"+addr
			}
		}
	}
	if o.Err != nil {
		return redisopt.Invalid(o.Err)
	}
	b, err := redlock.New(masters, o.Backend())
	if err != nil {
		return redisopt.Invalid(err)
	}
	return b
}
