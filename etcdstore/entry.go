package etcdstore

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"

	"github.com/distlock/distlock/store"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A holding is the value of an owner's key: what it holds, or waits for.
type holding struct {
	Owner  string   `json:"owner"`            // secret: it releases the lock
	Holds  []uint64 `json:"holds"`            // hold ids
	Writes []uint64 `json:"writes,omitempty"` // of Holds, a read-write lock's write holds
	Seq    uint64   `json:"seq"`              // the last renewal that moved the key
	// Permits is what a semaphore's owner holds or waits for; Capacity
	// the semaphore's capacity when the key was made (every key copies
	// the oldest one's, so they all agree).
	Permits  int    `json:"permits,omitempty"`
	Capacity int    `json:"capacity,omitempty"`
	Value    string `json:"value,omitempty"` // an election candidate's value
	// Revoked: Revoke was called; renewals are refused, and the lock is
	// held until its owner releases it or its lease runs out.
	Revoked bool   `json:"revoked,omitempty"`
	Host    string `json:"host"`
	PID     int    `json:"pid"`
	Since   int64  `json:"since"` // ms since the epoch, by the owner's clock
}

func (h holding) encode() string { return string(h.appendJSON(nil)) }

// appendJSON appends h as json.Marshal encodes it, byte for byte, without
// its reflection: every acquisition encodes one.
func (h holding) appendJSON(b []byte) []byte {
	b = append(b, `{"owner":`...)
	b = appendJSONString(b, h.Owner)
	b = append(b, `,"holds":`...)
	b = appendUints(b, h.Holds)
	if len(h.Writes) > 0 {
		b = append(b, `,"writes":`...)
		b = appendUints(b, h.Writes)
	}
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, h.Seq, 10)
	if h.Permits != 0 {
		b = append(b, `,"permits":`...)
		b = strconv.AppendInt(b, int64(h.Permits), 10)
	}
	if h.Capacity != 0 {
		b = append(b, `,"capacity":`...)
		b = strconv.AppendInt(b, int64(h.Capacity), 10)
	}
	if h.Value != "" {
		b = append(b, `,"value":`...)
		b = appendJSONString(b, h.Value)
	}
	if h.Revoked {
		b = append(b, `,"revoked":true`...)
	}
	b = append(b, `,"host":`...)
	b = appendJSONString(b, h.Host)
	b = append(b, `,"pid":`...)
	b = strconv.AppendInt(b, int64(h.PID), 10)
	b = append(b, `,"since":`...)
	b = strconv.AppendInt(b, h.Since, 10)
	return append(b, '}')
}

// appendUints appends vs as a JSON array (null if nil, as json.Marshal).
func appendUints(b []byte, vs []uint64) []byte {
	if vs == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, v := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, v, 10)
	}
	return append(b, ']')
}

// appendJSONString appends s quoted as json.Marshal quotes it: as it is if
// it holds only printable ASCII that needs no escape, by json.Marshal
// otherwise.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// writes reports whether the owner holds (or waits for) the write side of
// a read-write lock.
func (h holding) writes() bool { return len(h.Writes) > 0 }

// A contender is one key of a lock: an owner that holds it or waits.
type contender struct {
	holding
	kv     *mvccpb.KeyValue
	letter byte
}

func (c contender) token() uint64 { return uint64(c.kv.CreateRevision) }

// contenders reads the keys of a lock's directory from a range reply, in
// the order of their create revisions: the queue. Keys it cannot read are
// left out (they are no one's).
func contenders(dir string, kvs []*mvccpb.KeyValue) []contender {
	cs := make([]contender, 0, len(kvs))
	for _, kv := range kvs {
		var h holding
		if decodeHolding(kv.Value, &h) != nil || h.Owner == "" {
			continue
		}
		cs = append(cs, contender{holding: h, kv: kv, letter: letterOf(dir, string(kv.Key))})
	}
	slices.SortFunc(cs, func(a, b contender) int { return int(a.kv.CreateRevision - b.kv.CreateRevision) })
	return cs
}

// rangeOp reads a lock's directory in queue order, with opts.
func rangeOp(dir string, opts ...clientv3.OpOption) clientv3.Op {
	return clientv3.OpGet(dir, append([]clientv3.OpOption{clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)}, opts...)...)
}

// ahead are the options of a read of a lock's keys that returns only
// those that can keep a place of kind, made at revision token, out: the
// keys up to its own (those behind it never can), and of a kind that
// admits one key at a time (a mutex, a fair mutex, an election) only the
// last two, itself and the one before it, whose end it waits for.
func ahead(kind store.Kind, token uint64) []clientv3.OpOption {
	opts := []clientv3.OpOption{clientv3.WithMaxCreateRev(int64(token))}
	if oneAtATime(kind) {
		opts = append(opts, lastTwo...)
	}
	return opts
}

// lastTwo makes a read of a lock's keys return its last two, in create
// order (contenders puts them back in queue order).
var lastTwo = []clientv3.OpOption{clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(2)}

// readAhead reads the contenders of g, the reply to a read with ahead's
// options. It reports false if the read was cut short (the last two) and
// a key of it was unreadable: contenders leaves such a key out as no
// one's, and the keys before it, which the read did not return, may keep
// the place out.
func readAhead(dir string, g *clientv3.GetResponse) ([]contender, bool) {
	if g == nil {
		return nil, false
	}
	cs := contenders(dir, g.Kvs)
	return cs, !g.More || len(cs) == len(g.Kvs)
}

// oneAtATime reports whether the lock of kind admits one key at a time.
func oneAtATime(kind store.Kind) bool {
	l := letters[kind]
	return l == 'm' || l == 'f' || l == 'e'
}

// queue reads the contenders of the lock name, with opts, and the
// revision read at.
func (s *Store) queue(ctx context.Context, name string, opts ...clientv3.OpOption) ([]contender, int64, error) {
	dir := s.lockDir(name)
	resp, err := s.cli.Do(ctx, rangeOp(dir, opts...))
	if err != nil {
		return nil, 0, backendErr(err)
	}
	g := resp.Get()
	return contenders(dir, g.Kvs), g.Header.Revision, nil
}

// find returns the index of owner's key among cs, or -1.
func find(cs []contender, owner string) int {
	return slices.IndexFunc(cs, func(c contender) bool { return c.Owner == owner })
}

// otherKind reports whether cs holds a key of another kind than letter.
func otherKind(cs []contender, letter byte) bool {
	return slices.ContainsFunc(cs, func(c contender) bool { return c.letter != letter })
}

// capacityOf is a semaphore's capacity: the oldest key's, or the caller's
// if there is none.
func capacityOf(cs []contender, caller int) int {
	if len(cs) > 0 && cs[0].Capacity > 0 {
		return cs[0].Capacity
	}
	return caller
}
