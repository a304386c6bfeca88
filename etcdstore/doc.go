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
// It serves every kind: Mutex, MultiMutex (one member after another),
// FairMutex, RWMutex, Semaphore and Election (with Observe), Once (its
// records are keys on leases of the time they are kept), Inspect, List,
// ForceUnlock and Revoke (the holder's process is told at once, through a
// watch, or finds out at its next renewal). OncePer fails with
// ErrUnsupported: its periods are counted by the store's clock, and etcd
// has none a request can read; so does SetPermits, for now.
//
// # Keys
//
// Every acquisition is a key of its own, <prefix>lock/{name}/<t>/<id>.<n>
// (t: the kind; id the store's, n a slot of it that the store's next
// acquisition of the lock takes again once the owner is gone), on the
// store's etcd lease: its value records the owner's holds and who took
// it. The keys of one lock, in the order of their create
// revisions, are its queue, and the first of them hold it (a mutex's one
// key; a fair mutex's or an election's first; a read-write lock's readers
// before the first writer, or that writer; a semaphore's first keys whose
// permits fit): a release, an expiry or a force-unlock grants the lock to
// the next in line in the same write. A waiter watches only the key before
// it (the last writer before it, for a reader; every release, for a
// semaphore), so a release wakes one process, not all; the deletes of its
// own key (an expiry, an operator) come through one watch per lock of the
// keys of the store's owners, so that it queues again at once. A plain
// mutex's waiters put no keys of their own: the processes that wait for it
// take turns, each with one key, <prefix>line/{name}/<id>, on a lease of
// its own, and only the process at the front of that line tries when the
// lock is freed, moving its key to the back as it takes the lock; an
// acquisition of a process that does not wait fails while anyone does
// (but for a multi-lock's members: line.go), so no process is passed over. A waiter's watches start
// at the server's current revision and what it waits for is read after
// they are made: a watch from a revision already past would wait for etcd's resync
// of lagging watchers (100 ms), and so would every hand-over under
// contention. An acquisition that may queue (the Client found the lock
// taken) puts its place in one transaction, and holds at once if the keys
// before it are gone.
//
// A key's create revision is its owner's fencing token: a resource must
// keep, per lock name, the highest token it accepted, and refuse a lower
// one. Tokens are revisions of the whole etcd cluster: compare them only
// within one name; readers' tokens order nothing among themselves.
//
// An owner given up by the Client (a request whose outcome is unknown) is
// marked by <prefix>mark/<owner>/<name>, which refuses its late
// acquisitions for store.AbandonFor of its lease, and its key is deleted
// in the same transaction (only if it was not marked yet: a late copy
// deletes nothing). Only its owner writes a key, as a compare-and-swap on
// its last revision, or, to release every hold, as a plain delete while
// no other owner can have a key of that name (a name a delete may still
// reach goes to no other owner), so a late or repeated release or renewal
// never touches another owner's hold.
//
// # Leases
//
// A store keeps one etcd lease per lease length (whole seconds): one for
// its holds, one for its places in queues. A thousand held locks cost one
// lease and about one keep-alive a second, not a thousand. A request that
// puts or keeps a key on a lease counts only once a keep-alive of that
// lease, sent at most a second before the request began, was answered, and
// the lease's TTL is the lock's lease plus a second, rounded up to whole
// seconds: so the server's expiry is never earlier than the Client's
// deadline. When the process dies or is cut off, its leases expire and its
// locks with them, up to 2 s after their own leases; Close revokes them.
// A lease or queue timeout shorter than MinLease is refused with
// ErrInvalidOption (etcd's TTLs are whole seconds, with a floor). An etcd leader change extends every lease (the safe
// direction). A grant needs no confirmation (the store is not a
// store.GrantConfirmer): the waiter learns of it by a read of committed
// keys (as of the revision of the change its watches reported, from any
// member that has applied it; linearizable if none has), and its key, on
// the lease of places until then, moves to the lease of holds at its first
// renewal.
//
// # The etcd client
//
// The store uses the client's KV, Lease and Watcher, so a client whose
// APIs are etcd's namespace wrappers (namespace.NewKV and its siblings)
// keeps its locks under the namespace's prefix. The two requests of an
// uncontended pair, the transaction that takes a free lock and the delete
// that frees it, are built as etcd's protocol messages and sent on the
// client's own gRPC stub, with clientv3's default call options, while
// the client's KV is the one clientv3.New made (it is checked at each
// request); through the KV otherwise, so that a wrapper sees them as it
// sees every other request.
//
// The Client never closes the etcd client given to New.
package etcdstore
