package safety

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand"
	"strings"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdstore"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// The chaos client's side of the etcd mode (TestChaosEtcd): the
// distlock.Client on etcdstore, through this client's proxies to the
// members (clientConfig.Etcd), a gRPC interceptor that records what the
// checks need of the store's requests, and the MultiMutex workload.

// etcdPrefix is the etcd mode's key prefix (etcdstore's default): locks
// are <prefix>lock/{<name>}/<kind>/<owner>, abandonment marks <prefix>mark/<owner>/<name>,
// revocation notices <prefix>revoked/<grantee>/<name>.
const etcdPrefix = etcdstore.DefaultPrefix

// newEtcdLocks makes the client process's etcd client (on the endpoints
// of its proxies) and its distlock.Client on etcdstore.
func (c *chaosClient) newEtcdLocks(opts []distlock.Option) error {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: c.cfg.Etcd,
		// No blocking dial: a process started while its member is down
		// starts all the same, and its requests fail until it is back.
		DialTimeout: 0,
		// A frozen proxy is found within a lease, and the balancer
		// moves to another endpoint, if the client has one.
		DialKeepAliveTime:    c.cfg.Lease / 4,
		DialKeepAliveTimeout: c.cfg.Lease / 4,
		Logger:               zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(c.etcdRecorder),
			grpc.WithChainStreamInterceptor(c.etcdWatchRecorder)},
	})
	if err != nil {
		return err
	}
	c.etcd = cli
	c.locks = distlock.New(etcdstore.New(cli), opts...)
	return nil
}

// etcdRecorder watches every unary request of the etcd client, as the
// scriptRecorder does the Redis scripts: each acquisition transaction (a
// put of a lock key if it and the owner's abandonment mark do not exist)
// is recorded as an enq record, with the owner's placeID and the number of
// the worker's acquisition the caller's context carries; a failed put of
// an abandonment mark (the first step of a clean-up) as an abf record; an
// abandonment transaction that etcd applied as an abok record; and
// any other failed request that carries no acquisition number (renewals,
// releases, clean-ups: the engine's own) as an rpcerr record, so that the
// give-up check can leave out the calls whose clean-up may have failed.
func (c *chaosClient) etcdRecorder(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	call, callWall := mono(), wall()
	err := invoker(ctx, method, req, reply, cc, opts...)
	owner, _ := ctx.Value(ownerKey{}).(int64)
	switch r := req.(type) {
	case *pb.TxnRequest:
		if name, id, ok := etcdAcquireTxn(r); ok {
			res := "error"
			if err == nil {
				res = "refused"
				if tr, ok := reply.(*pb.TxnResponse); ok && tr.Succeeded {
					res = "acquired"
				}
			}
			c.h.write(record{K: "enq", Client: c.cfg.ID, Owner: owner, Name: name, Place: placeID(id), Script: "etcd_acquire",
				Call: call, Ret: mono(), CallWall: callWall, Wall: wall(), Res: res, Err: errString(err)})
			return err
		}
		if name, id, ok := etcdAbandonTxn(r); ok && err == nil {
			c.h.write(record{K: "abok", Client: c.cfg.ID, Name: name, Place: placeID(id), T: mono()})
			return nil
		}
	case *pb.PutRequest:
		if id, name, ok := strings.Cut(strings.TrimPrefix(string(r.Key), etcdPrefix+"mark/"), "/"); ok && err != nil && strings.HasPrefix(string(r.Key), etcdPrefix+"mark/") {
			c.h.write(record{K: "abf", Client: c.cfg.ID, Name: name, Place: placeID(id), Wall: wall(), T: mono(), Err: err.Error()})
			return err
		}
	}
	if err != nil && owner == 0 && !errors.Is(ctx.Err(), context.Canceled) {
		c.h.write(record{K: "rpcerr", Client: c.cfg.ID, Script: method, Call: call, Ret: mono(), Err: err.Error()})
	}
	return err
}

// etcdWatchRecorder records (a wcomp record) each watch response of the
// etcd client that says its watch was compacted past: the client resumed
// a watch (after its connection was reset) from a revision that a
// compaction had removed, and the store must make it again.
func (c *chaosClient) etcdWatchRecorder(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || method != "/etcdserverpb.Watch/Watch" {
		return s, err
	}
	return watchStream{s, c}, nil
}

type watchStream struct {
	grpc.ClientStream
	c *chaosClient
}

func (w watchStream) RecvMsg(m any) error {
	err := w.ClientStream.RecvMsg(m)
	if r, ok := m.(*pb.WatchResponse); ok && err == nil && r.CompactRevision != 0 {
		w.c.h.write(record{K: "wcomp", Client: w.c.cfg.ID, T: mono(), Token: uint64(r.CompactRevision)})
	}
	return err
}

// etcdAbandonTxn reads r as an abandonment transaction of etcdstore (a
// put of an abandonment mark, <prefix>mark/<owner>/<name>, in either
// branch) and returns the lock's name and the owner id.
func etcdAbandonTxn(r *pb.TxnRequest) (name, owner string, ok bool) {
	for _, op := range append(r.Success, r.Failure...) {
		if p := op.GetRequestPut(); p != nil {
			if rest, found := strings.CutPrefix(string(p.Key), etcdPrefix+"mark/"); found {
				owner, name, ok = strings.Cut(rest, "/")
				return name, owner, ok
			}
		}
	}
	return "", "", false
}

// etcdAcquireTxn reads r as an acquisition transaction of etcdstore: a
// comparison on an abandonment mark, <prefix>mark/<owner>/<name>, and a put
// of a key of the lock (under <prefix>lock/{<name>}/). It returns the
// lock's name and the owner id.
func etcdAcquireTxn(r *pb.TxnRequest) (name, owner string, ok bool) {
	for _, cmp := range r.Compare {
		key := string(cmp.Key)
		if rest, found := strings.CutPrefix(key, etcdPrefix+"mark/"); found {
			owner, name, ok = strings.Cut(rest, "/")
		}
	}
	if !ok {
		return "", "", false
	}
	for _, op := range r.Success {
		if p := op.GetRequestPut(); p != nil {
			if n, ok := etcdLockName(string(p.Key)); ok && n == name {
				return name, owner, true
			}
		}
	}
	return "", "", false
}

// etcdLockName returns the lock name of a key of a lock,
// <prefix>lock/{<name>}/<kind>/<store id>.<slot> (one key per owner at a
// time: its hold or its place; a name cannot hold braces).
func etcdLockName(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, etcdPrefix+"lock/{")
	if !ok {
		return "", false
	}
	name, _, ok := strings.Cut(rest, "}/")
	return name, ok
}

// etcdHolding is what the checks read of a lock key's value (etcdstore's
// holding): its owner (secret: kept in memory, reported as its placeID)
// and the holder's process.
type etcdHolding struct {
	Owner string `json:"owner"`
	PID   int    `json:"pid"`
}

func decodeHolding(v []byte) (etcdHolding, bool) {
	var h etcdHolding
	return h, json.Unmarshal(v, &h) == nil && h.Owner != ""
}

// workMulti is one iteration of the MultiMutex workload (the etcd mode):
// two distinct plain names taken together with Lock (or TryLock), held
// with a fenced read-modify-write of each member's register under that
// member's token, and unlocked together. Each member is recorded as an
// acquisition of its own name (its own owner number; Group is the first,
// the one the context carries), with the lease's interval and outcome, so
// that every checker of the mutexes covers the members.
func (c *chaosClient) workMulti(rng *rand.Rand) {
	var plain []string
	for _, n := range c.cfg.Names {
		if c.cfg.Fair[n] == 0 && c.cfg.Elect[n] == 0 && c.cfg.RW[n] == 0 && c.cfg.Sem[n] == 0 {
			plain = append(plain, n)
		}
	}
	if len(plain) < 2 {
		return
	}
	rng.Shuffle(len(plain), func(i, j int) { plain[i], plain[j] = plain[j], plain[i] })
	names := plain[:2]
	owners := []int64{c.seq.Add(1), c.seq.Add(1)}
	m := c.locks.MultiMutex(names, distlock.WithTTL(c.cfg.Lease))
	try := rng.Float64() < c.cfg.TryRate
	cancelMid := rng.Float64() < c.cfg.CancelRate || mono() < c.cancelTil.Load()
	timeout := 3 * c.cfg.Lease
	if cancelMid {
		timeout = time.Duration(rng.Int63n(int64(c.cfg.Lease / 2)))
	}
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), ownerKey{}, owners[0]), timeout)
	call := mono()
	var l *distlock.Lease
	var err error
	if try {
		l, err = m.TryLock(ctx)
	} else {
		l, err = m.Lock(ctx)
	}
	cancel()
	ret, retWall := mono(), wall()
	res := classify(err)
	if res == "notacq" {
		// Refused for the set: one member at least was held, not
		// necessarily this one (the members are taken one after another,
		// and those taken are released when a later one is refused). For
		// the mutex model of each member, an outcome unknown.
		res = "notacq-multi"
	}
	for i, name := range names {
		rec := record{K: "acq", Client: c.cfg.ID, Owner: owners[i], Group: owners[0], Name: name, Try: try, Call: call, Ret: ret, Wall: retWall,
			Res: res, Cancel: cancelMid, Multi: true, Err: errString(err)}
		if err == nil {
			rec.Token = l.Tokens()[name]
			c.mu.Lock()
			c.owners[holdKey(name, rec.Token)] = owners[i]
			c.mu.Unlock()
			context.AfterFunc(l.Context(), func() {
				c.h.write(record{K: "cancel", Client: c.cfg.ID, Owner: rec.Owner, Name: name, Token: rec.Token, T: mono(), Err: errString(context.Cause(l.Context()))})
			})
		}
		c.h.write(rec)
	}
	if err != nil {
		if k := classify(err); k == "other" || k == "backend" {
			time.Sleep(time.Duration(10+rng.Intn(40)) * time.Millisecond) // the store unreachable: do not spin
		}
		return
	}
	// The guarded work, on both registers.
	gctx, gcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer gcancel()
	vals := make([]int64, len(names))
	for i, name := range names {
		tok := l.Tokens()[name]
		call := mono()
		v, ok, err := fencedRead(gctx, c.store, name, tok, owners[i])
		c.h.write(record{K: "op", Client: c.cfg.ID, Owner: owners[i], Name: name, Token: tok, Op: "r", Call: call, Ret: mono(), Acc: ok, Err: errString(err)})
		if err != nil || !ok {
			c.releaseMulti(l, names, owners)
			return
		}
		vals[i] = v
	}
	if rng.Float64() < c.cfg.ExtendRate {
		c.extend(rng, l, names[0], owners[0])
	}
	work := time.Duration(rng.Int63n(int64(c.cfg.WorkMax) + 1))
	if rng.Float64() < c.longRate() {
		work = c.cfg.Lease + time.Duration(rng.Int63n(int64(c.cfg.Lease))) // outlives the lease: renewals
	}
	careful := rng.Intn(3) != 0
	t := time.NewTimer(work)
	select {
	case <-t.C:
	case <-l.Context().Done():
		if careful {
			t.Stop()
			c.releaseMulti(l, names, owners)
			return
		}
		<-t.C
	}
	if !careful || l.Context().Err() == nil {
		for i, name := range names {
			tok := l.Tokens()[name]
			call := mono()
			ok, err := fencedWrite(gctx, c.store, name, tok, owners[i], vals[i])
			c.h.write(record{K: "op", Client: c.cfg.ID, Owner: owners[i], Name: name, Token: tok, Op: "w", Call: call, Ret: mono(), Acc: ok, Err: errString(err)})
		}
	}
	c.releaseMulti(l, names, owners)
}

// releaseMulti unlocks a MultiMutex's lease and records the release of
// each member.
func (c *chaosClient) releaseMulti(l *distlock.Lease, names []string, owners []int64) {
	tokens := l.Tokens()
	uctx, ucancel := context.WithTimeout(context.Background(), 2*c.cfg.Lease)
	call, callWall := mono(), wall()
	err := l.Unlock(uctx)
	ret := mono()
	ucancel()
	for i, name := range names {
		c.h.write(record{K: "rel", Client: c.cfg.ID, Owner: owners[i], Name: name, Token: tokens[name], Call: call, Wall: callWall, Ret: ret,
			Res: classifyRelease(err), Err: errString(err), LostCause: lostCause(l)})
		c.mu.Lock()
		delete(c.owners, holdKey(name, tokens[name]))
		c.mu.Unlock()
	}
}
