// Package etcdstore keeps distlock's locks in etcd (v3 API), the strict
// store that the Redis lock literature points to: its writes are ordered
// by Raft, so a lock does not go back to free on a failover, and fencing
// tokens are etcd revisions, strictly increasing across the whole cluster
// and across leader changes.
//
//	cli, _ := clientv3.New(clientv3.Config{Endpoints: []string{"localhost:2379"}})
//	c := distlock.New(etcdstore.New(cli))
//	defer c.Close()
//
// This first version serves the plain Mutex and MultiMutex, Once (its
// records are keys on leases of the time they are kept), Inspect, List,
// ForceUnlock and Revoke (the holder's process is told at once, through a
// watch, or finds out at its next renewal); the other kinds (FairMutex, RWMutex,
// Semaphore, Election) and SetPermits fail with ErrUnsupported before any
// request, until they are built (see docs/design/etcdstore.md). OncePer
// fails with ErrUnsupported: its periods are counted by the store's
// clock, and etcd has none a request can read.
//
// # Keys
//
// A lock name is the key <prefix>lock/<name>, written with an etcd lease
// of its own: its value records the owner (secret, as in Redis), its
// holds, and who took it. The key's create revision is the fencing token:
// a resource must refuse a token below the highest it has seen. An owner
// given up by the Client (a request whose outcome is unknown) is marked
// by <prefix>mark/<owner>/<name>, which refuses its late acquisitions for
// store.AbandonFor of its lease.
//
// # Leases
//
// etcd's leases have whole-second TTLs and a floor: a lock's lease is
// rounded up to whole seconds, so a dead holder's lock is free at most
// that later, and a lease shorter than MinLease is refused with
// ErrInvalidOption. An etcd leader change extends every lease (the safe
// direction: a holder's local deadline never outlives the server's).
//
// The Client never closes the etcd client given to New.
package etcdstore
