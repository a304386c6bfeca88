// Package store defines what a store of locks implements for package
// distlock, as database/sql/driver does for database/sql. Users never call
// a store: they pass one to distlock.New and use the Client.
//
//	c := distlock.New(redisstore.New(rdb))
//
// A store implements Store: one atomic step per request (acquire, release,
// abandon, renew) and notices of releases and grants. The Client of
// package distlock drives it: it decides when to try, wait, renew and give
// up, keeps every lease's local deadline, and counts on the guarantees
// documented on Store to make late and repeated requests harmless. What a
// store can do beyond that it declares by implementing small interfaces,
// which distlock finds by type assertion: Validator (what it refuses
// before any request), Inspector, Lister, ForceUnlocker, Revoker,
// RevokeWatcher, OnceKeeper, PermitSetter, LeaderWatcher and
// GrantConfirmer. An operation whose interface a store lacks fails with
// ErrUnsupported, before any request.
//
// Errors: every failure of the store itself wraps ErrBackend (and
// ErrUnsent as well when the request certainly never reached it); a
// request the store cannot serve wraps ErrUnsupported; the outcomes the
// methods document (ErrWrongKind, ErrDeadlock, ErrNotHeld, ErrSuperseded,
// ErrNotReplicated, ErrInvalidOption) are returned as they say. ErrClosed,
// ErrLockLost, ErrLeaseExpired and ErrNotAcquired are the Client's own. A
// store never gives a weaker guarantee silently: what it cannot give is
// ErrUnsupported.
//
// Package storetest checks a store against all of this through the public
// API of distlock: a store passes it before it is used.
package store
