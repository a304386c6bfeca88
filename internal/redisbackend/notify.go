package redisbackend

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/distlock/distlock/store"
)

// notifier multiplexes the release channels of every watched lock over
// shared pub/sub connections: one for a standalone or Sentinel client, one
// per slot with watchers for a Cluster client (sharded pub/sub lives on the
// slot's node).
type notifier struct {
	conn    Conn
	sharded bool
	self    string // messages carrying this are our own releases: ignored

	subMu sync.Mutex // orders SUBSCRIBE and UNSUBSCRIBE writes

	mu     sync.Mutex // guards the fields below
	groups map[int]*group
	closed bool
	wg     sync.WaitGroup
}

type group struct {
	ps        PubSub              // replaced by follow; guarded by subMu and mu
	watches   map[string][]*watch // by channel, in the order they began
	following bool                // follow is subscribing the group again
}

// A watch delivers a channel's messages: deliver gets each payload, and
// an empty payload with lost set when messages may have been lost (the
// PubSub reconnected and subscribed again). A channel may have several watches:
// each gets every message, and has its own confirmation and stop.
type watch struct {
	deliver   func(payload string, lost bool)
	confirmed chan struct{} // closed by the first subscribe confirmation
	isSet     bool
}

// confirm closes w.confirmed, once; n.mu is held.
func (w *watch) confirm() {
	if !w.isSet {
		w.isSet = true
		close(w.confirmed)
	}
}

func newNotifier(conn Conn, sharded bool, self string) *notifier {
	return &notifier{conn: conn, sharded: sharded, self: self, groups: map[int]*group{}}
}

func (n *notifier) groupKey(channel string) int {
	if n.sharded {
		return KeySlot(channel)
	}
	return 0
}

// watch subscribes to channel and returns once Redis has confirmed it.
// Every watch sends a SUBSCRIBE of its own, also to a channel that other
// watches have subscribed already, so that each has a confirmation to wait
// for (see read).
func (n *notifier) watch(ctx context.Context, channel string, deliver func(payload string, lost bool)) (func(), error) {
	w := &watch{deliver: deliver, confirmed: make(chan struct{})}
	key := n.groupKey(channel)

	n.subMu.Lock()
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		n.subMu.Unlock()
		return nil, store.ErrClosed
	}
	g := n.groups[key]
	fresh := g == nil
	if fresh {
		g = &group{ps: n.conn.Subscribe(n.sharded), watches: map[string][]*watch{}}
		n.groups[key] = g
	}
	g.watches[channel] = append(g.watches[channel], w)
	n.mu.Unlock()
	err := g.ps.Subscribe(ctx, channel)
	if fresh {
		if err == nil {
			err = n.confirm(ctx, g.ps, w)
		}
		n.mu.Lock()
		if err == nil {
			n.wg.Add(1) // under subMu: close cannot be waiting yet
			go n.read(g, g.ps)
		} else {
			delete(n.groups, key)
		}
		n.mu.Unlock()
		if err != nil {
			_ = g.ps.Close()
		}
	}
	n.subMu.Unlock()

	var once sync.Once
	stop := func() { once.Do(func() { n.unwatch(key, channel, w) }) }
	if err != nil {
		stop()
		return nil, connErr(n.conn, ctx, err)
	}
	select {
	case <-w.confirmed:
		return stop, nil
	case <-ctx.Done():
		stop()
		return nil, context.Cause(ctx)
	}
}

// confirm reads the reply to the first subscription of a new connection,
// before its reader starts. This is where a refusal shows (an ACL without
// SUBSCRIBE or without the channel pattern): the shared reader could only
// drop it. Later subscriptions on the connection are to channels of the
// same prefix, so they are refused, if at all, at the first.
func (n *notifier) confirm(ctx context.Context, ps PubSub, w *watch) error {
	timeout := time.Duration(0)
	if d, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(d), time.Millisecond)
	}
	for {
		e, err := ps.Receive(ctx, timeout)
		if err != nil {
			return err
		}
		if e.Kind == Subscribed {
			n.mu.Lock()
			w.confirm()
			n.mu.Unlock()
			return nil
		}
	}
}

// unwatch ends the watch w of channel. The channel is unsubscribed when
// its last watch ends.
func (n *notifier) unwatch(key int, channel string, w *watch) {
	n.subMu.Lock()
	defer n.subMu.Unlock()
	n.mu.Lock()
	g := n.groups[key]
	if g == nil {
		n.mu.Unlock()
		return
	}
	watches := slices.DeleteFunc(g.watches[channel], func(x *watch) bool { return x == w })
	if len(watches) > 0 {
		g.watches[channel] = watches
		n.mu.Unlock()
		return
	}
	delete(g.watches, channel)
	drop := n.sharded && len(g.watches) == 0
	if drop {
		delete(n.groups, key)
	}
	n.mu.Unlock()
	if drop {
		_ = g.ps.Close()
		return
	}
	_ = g.ps.Unsubscribe(context.Background(), channel)
}

// read dispatches the messages of g's connection ps until it is closed,
// each to every watch of its channel. A subscribe confirmation confirms
// every watch of its channel still waiting for one (the channel is
// subscribed), and tells the watches confirmed before it that messages
// may have been lost: it may be the PubSub's subscription again after a
// reconnection, which cannot be told from the reply to a new watch's
// SUBSCRIBE, and a needless look costs little. A sharded subscription
// that Redis ended while it is watched means that the slot moved to
// another master: follow subscribes the group there.
func (n *notifier) read(g *group, ps PubSub) {
	defer n.wg.Done()
	ps.Run(func(e Event) {
		var channel, payload string
		var isConfirm bool
		switch e.Kind {
		case Message:
			if e.Payload == n.self {
				return
			}
			channel, payload = e.Channel, e.Payload
		case Unsubscribed:
			if !n.sharded {
				return
			}
			n.mu.Lock()
			moved := g.ps == ps && len(g.watches[e.Channel]) > 0 && !g.following && !n.closed
			if moved {
				g.following = true
				n.wg.Add(1)
				go n.follow(g)
			}
			n.mu.Unlock()
			return
		case Subscribed:
			channel, isConfirm = e.Channel, true
		default:
			return
		}
		n.mu.Lock()
		var few [2]*watch // most channels have one watch: no allocation
		to := few[:0]
		for _, w := range g.watches[channel] {
			if isConfirm && !w.isSet {
				w.confirm()
				continue
			}
			to = append(to, w)
		}
		n.mu.Unlock()
		for _, w := range to {
			w.deliver(payload, isConfirm)
		}
	})
}

// follow subscribes the channels of the sharded group g again, on a new
// connection, once Redis has ended them on the old one (their slot moved
// to another master, or the node gave it up): it has the client reload
// its slot map and tries, backing off, until the slot's master accepts,
// or until the notifier is closed or the group is dropped. Its watchers
// are then woken, as after a reconnection: a release may have come in
// between.
func (n *notifier) follow(g *group) {
	defer n.wg.Done()
	ctx := context.Background()
	delay := 50 * time.Millisecond
	for {
		n.subMu.Lock()
		n.mu.Lock()
		var channels []string
		for ch := range g.watches {
			channels = append(channels, ch)
		}
		if n.closed || len(channels) == 0 || n.groups[n.groupKey(channels[0])] != g {
			g.following = false
			n.mu.Unlock()
			n.subMu.Unlock()
			return
		}
		n.mu.Unlock()
		n.conn.Reload(ctx)
		ps := n.conn.Subscribe(true)
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		err := ps.Subscribe(sctx, channels...)
		if err == nil {
			_, err = ps.Receive(sctx, time.Second) // a confirmation, or the refusal (MOVED)
		}
		cancel()
		if err == nil {
			n.mu.Lock()
			old := g.ps
			g.ps, g.following = ps, false
			var watches []*watch
			for _, ws := range g.watches {
				for _, w := range ws {
					w.confirm() // if it was due on the old connection
					watches = append(watches, w)
				}
			}
			n.wg.Add(1)
			go n.read(g, ps)
			n.mu.Unlock()
			n.subMu.Unlock()
			_ = old.Close()
			for _, w := range watches {
				w.deliver("", true)
			}
			return
		}
		_ = ps.Close()
		n.subMu.Unlock()
		time.Sleep(delay)
		delay = min(2*delay, time.Second)
	}
}

// parseGrants reads a grant message of the lock scripts: 'g' and, for
// each grant to an owner of this process, '<grantee> <token> <gseq>
// <lease ms>' (queue.lua's grant_place). It returns nil for anything else (a
// release).
func parseGrants(payload string) []store.Notice {
	f := strings.Fields(payload)
	if len(f) < 5 || f[0] != "g" || (len(f)-1)%4 != 0 {
		return nil
	}
	var out []store.Notice
	for i := 1; i < len(f); i += 4 {
		tok, err1 := strconv.ParseUint(f[i+1], 10, 64)
		seq, err2 := strconv.ParseUint(f[i+2], 10, 64)
		ms, err3 := strconv.ParseInt(f[i+3], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil
		}
		out = append(out, store.Notice{Grantee: f[i], Token: tok, Seq: seq, Lease: time.Duration(ms) * time.Millisecond})
	}
	return out
}

// close ends every subscription and waits for the readers to stop.
func (n *notifier) close() error {
	n.subMu.Lock()
	n.mu.Lock()
	n.closed = true
	groups := n.groups
	n.groups = map[int]*group{}
	n.mu.Unlock()
	n.subMu.Unlock()
	for _, g := range groups {
		_ = g.ps.Close()
	}
	n.wg.Wait()
	return nil
}

// hashTag returns the part of key that Redis Cluster hashes.
func hashTag(key string) string {
	for i := 0; i < len(key); i++ {
		if key[i] == '{' {
			for j := i + 1; j < len(key); j++ {
				if key[j] == '}' {
					if j > i+1 {
						return key[i+1 : j]
					}
					return key
				}
			}
			return key
		}
	}
	return key
}
