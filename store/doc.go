// Package store defines what a store of locks implements for package
// distlock, as database/sql/driver does for database/sql. Users never call
// a store: they pass one to distlock.New and use the Client.
//
//	c := distlock.New(redisstore.New(rdb))
//
// A store implements Store: one atomic step per request (acquire, release,
// abandon, renew) and notices of releases and grants. Package distlock's
// engine drives it: it decides when to try, wait, renew and give up, keeps
// every lease's local deadline, and counts on the guarantees documented on
// Store to make late and repeated requests harmless. What a store can do
// beyond that (inspection, listing, force-unlock and revocation, run-once
// records, semaphore capacity, leader announcements, confirmation of
// grants) it declares by implementing the small interfaces of
// capabilities.go; distlock finds them by type assertion, and an operation
// whose interface a store lacks fails with ErrUnsupported.
//
// Errors: every failure of the store itself wraps ErrBackend (and
// ErrUnsent as well when the request certainly never reached it); a
// request the store cannot serve wraps ErrUnsupported. Never return a
// weaker guarantee silently.
//
// Package storetest checks a store against all of this through the public
// API of distlock: a store passes it before it is used.
package store
