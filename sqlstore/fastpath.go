package sqlstore

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/distlock/distlock/store"
)

// The fast path: the two steps an uncontended mutex makes most, as one
// statement each, without reading the row first. Taking a free mutex
// (its row's state exactly "{}": nobody holds or waits, no owner is
// marked) and releasing the last hold of a mutex whose state is that one
// holder and nothing else (on PostgreSQL, also one whose state adds only
// the mark that its release is to be told, lockState.Waited, which the
// statement then tells) are the same steps as lockState.acquire and lockState.release
// would make on those states; any other state makes the
// statement change nothing, and the step then goes the general way. A
// store whose dialect has no fast path always goes the general way.
type fastPath interface {
	// takeFree takes the free plain mutex of r for r.Owner, with the
	// state fragments of take; ok is false if the lock was not free.
	takeFree(ctx context.Context, r store.Request, f freeTake) (token uint64, ok bool, err error)
	// releaseOnly frees the plain mutex of r if r.Owner holds it with
	// hold r.Hold only (any holds if r.Hold is 0), nobody is queued and no
	// owner is marked; ok is false otherwise. A dialect that can also
	// free one whose release is to be told (lockState.Waited) sends tell,
	// the release's notice, when it does so, as lockState.freed would.
	releaseOnly(ctx context.Context, r store.Request, tell notice) (ok bool, err error)
}

// A freeTake is the state of a mutex just taken, as lockState.take
// writes it and json.Marshal encodes it, in the pieces around the three
// numbers only the database knows: the token, the lease's end and the
// time taken (ms).
type freeTake struct {
	beforeToken, beforeUntil, beforeSince, end string
	lease                                      int64 // µs
}

// newFreeTake is the freeTake of r, taken by a store on host with pid.
func newFreeTake(r store.Request, host string, pid int) freeTake {
	owner, _ := json.Marshal(r.Owner)
	seq := strconv.FormatUint(r.Seq, 10)
	f := freeTake{
		beforeToken: `{"kind":"mutex","holders":[{"owner":` + string(owner) + `,"token":`,
		beforeUntil: `,"holds":[{"id":` + strconv.FormatUint(max(r.Hold, 1), 10) + `,"side":109}],"until":`,
		lease:       micros(r.Lease),
	}
	f.beforeSince = `,"seq":` + seq + `,"gseq":` + seq + `,"glease":` + strconv.FormatInt(int64(r.Lease), 10)
	if host != "" {
		h, _ := json.Marshal(host)
		f.beforeSince += `,"host":` + string(h)
	}
	if pid != 0 {
		f.beforeSince += `,"pid":` + strconv.Itoa(pid)
	}
	f.beforeSince += `,"since":`
	f.end = `}]}`
	return f
}

// state is the state f makes with the three numbers.
func (f freeTake) state(token uint64, until, since int64) string {
	return f.beforeToken + strconv.FormatUint(token, 10) + f.beforeUntil + strconv.FormatInt(until, 10) +
		f.beforeSince + strconv.FormatInt(since, 10) + f.end
}

// fast reports the store's fast path for r, or nil.
func (s *Store) fast(r store.Request) fastPath {
	f, ok := s.db.(fastPath)
	if !ok || r.Kind != store.Plain || r.Reenter {
		return nil
	}
	return f
}

// takeFast tries the fast path of an acquisition: ok is false when the
// lock was not free (the general path then decides).
func (s *Store) takeFast(ctx context.Context, f fastPath, r store.Request) (store.Grant, bool, error) {
	if err := s.prepare(ctx); err != nil {
		return store.Grant{}, false, err
	}
	token, ok, err := f.takeFree(ctx, r, newFreeTake(r, s.host, s.pid))
	if err != nil || !ok {
		return store.Grant{}, false, s.hint(backendErr(err))
	}
	return store.Grant{Acquired: true, Token: token, Holds: 1, Seq: r.Seq, Lease: r.Lease}, true, nil
}

// releaseFast tries the fast path of a release.
func (s *Store) releaseFast(ctx context.Context, f fastPath, r store.Request) (bool, error) {
	if err := s.prepare(ctx); err != nil {
		return false, err
	}
	ok, err := f.releaseOnly(ctx, r, notice{Type: noticeRelease, Name: r.Name, Store: s.id})
	return ok, s.hint(backendErr(err))
}
