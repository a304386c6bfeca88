package sqlstore

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/distlock/distlock/store"
)

// A listener is a dialect that pushes notices (PostgreSQL's LISTEN).
type listener interface {
	// listen listens for the notices of the store's table on a
	// connection of its own, calls up once they are flowing, and got for
	// each, until ctx ends or the connection fails.
	listen(ctx context.Context, up func(), got func(payload string)) error
}

// A hub delivers notices to the store's watchers: from a listening
// connection where the database pushes them, else from its own steps and
// from a poller that reads the watched rows for changes.
type hub struct {
	s *Store

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	wakers   map[string]map[*func(store.Notice)]struct{}
	revokers map[*func(name, grantee string)]struct{}
	leaders  map[string]map[*leaderWatch]struct{}
	running  bool          // the listener or the poller runs
	up       chan struct{} // closed while the listener listens
	revs     map[string]uint64
	since    map[string]time.Time // poller: when each watched name began to be watched
	kick     chan struct{}        // poller: a name began to be watched: look again soon
}

type leaderWatch struct {
	fn   func(store.Announcement, bool)
	last uint64 // the last term delivered
}

func newHub(s *Store) *hub {
	h := &hub{s: s, wakers: map[string]map[*func(store.Notice)]struct{}{},
		revokers: map[*func(string, string)]struct{}{}, leaders: map[string]map[*leaderWatch]struct{}{},
		up: make(chan struct{}), revs: map[string]uint64{}, since: map[string]time.Time{},
		kick: make(chan struct{}, 1)}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	return h
}

func (h *hub) close() {
	h.cancel()
	h.wg.Wait()
}

// pushing reports whether the database pushes notices to the store.
func (h *hub) pushing() bool {
	_, ok := h.s.db.(listener)
	return ok && h.s.cfg.notify
}

// start starts the listener or the poller if it does not run, and waits
// until notices are flowing.
func (h *hub) start(ctx context.Context) error {
	if err := h.s.prepare(ctx); err != nil {
		return err
	}
	h.mu.Lock()
	if h.ctx.Err() != nil {
		h.mu.Unlock()
		return store.ErrClosed
	}
	if !h.running {
		h.running = true
		h.wg.Add(1)
		if h.pushing() {
			go h.listen()
		} else {
			go h.poll()
		}
	}
	up := h.up
	h.mu.Unlock()
	if !h.pushing() {
		return nil
	}
	select {
	case <-up:
		return nil
	case <-ctx.Done():
		return backendErr(context.Cause(ctx))
	case <-h.ctx.Done():
		return store.ErrClosed
	}
}

// listen keeps a listening connection, made again after a pause when it
// fails; the watchers are told that notices may have been lost.
func (h *hub) listen() {
	defer h.wg.Done()
	l := h.s.db.(listener)
	pause := 50 * time.Millisecond
	for h.ctx.Err() == nil {
		listened := false
		_ = l.listen(h.ctx, func() {
			listened = true
			h.mu.Lock()
			close(h.up)
			h.mu.Unlock()
			h.lost() // missed while it was down
		}, h.got)
		h.mu.Lock()
		if listened {
			h.up = make(chan struct{})
			pause = 50 * time.Millisecond
		}
		h.mu.Unlock()
		select {
		case <-h.ctx.Done():
		case <-time.After(pause):
		}
		pause = min(2*pause, 2*time.Second)
	}
}

// got delivers a pushed notice.
func (h *hub) got(payload string) {
	n, ok := decodeNotice(payload)
	if !ok {
		return
	}
	if n.Type == noticeRelease && n.Store == h.s.id {
		return // the Client hands its own releases over directly
	}
	h.deliver(n)
}

// local delivers the notices of this store's own steps, where nothing
// pushes them back (with a listener, they come back through it, in commit
// order).
func (h *hub) local(ns []notice) {
	if h.pushing() {
		return
	}
	for _, n := range ns {
		if n.Type != noticeRelease {
			h.deliver(n)
		}
	}
}

func (h *hub) deliver(n notice) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch n.Type {
	case noticeRelease:
		for w := range h.wakers[n.Name] {
			(*w)(store.Notice{})
		}
	case noticeGrant:
		for w := range h.wakers[n.Name] {
			(*w)(n.grant())
			break // the engine finds the grantee: one delivery is enough
		}
	case noticeRevoked:
		for fn := range h.revokers {
			(*fn)(n.Name, n.Grantee)
		}
	case noticeLeader:
		a := n.announcement()
		for w := range h.leaders[n.Name] {
			if a.Term == 0 || a.Term > w.last {
				w.last = max(w.last, a.Term, a.Ended)
				w.fn(a, false)
			}
		}
	}
}

// lost tells every watcher that notices may have been lost.
func (h *hub) lost() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ws := range h.wakers {
		for w := range ws {
			(*w)(store.Notice{})
		}
	}
	for _, ws := range h.leaders {
		for w := range ws {
			w.fn(store.Announcement{}, true)
		}
	}
}

// poll reads the rows of the watched locks, and tells the watchers of
// those that changed: a plain mutex's waiters try again, a queued kind's
// grants to live holders are delivered as notices (the engine ignores
// grantees that are not its own), and an election's observers hear of a
// new leader. It backs off: soon after a lock began to be watched it
// looks every minPoll (a short critical section ends soon), then at an
// eighth of the time the youngest watch has lasted, up to the poll
// interval; jittered by a tenth either way.
func (h *hub) poll() {
	defer h.wg.Done()
	for {
		every := h.nextPoll()
		jitter := time.Duration(rand.Int64N(int64(every)/5 + 1))
		select {
		case <-h.ctx.Done():
			return
		case <-h.kick:
			continue // a wait began: the next look is minPoll away
		case <-time.After(every - every/10 + jitter):
		}
		h.mu.Lock()
		names := make([]string, 0, len(h.wakers)+len(h.leaders))
		for n := range h.wakers {
			names = append(names, n)
		}
		for n := range h.leaders {
			names = append(names, n)
		}
		h.mu.Unlock()
		if len(names) == 0 {
			continue
		}
		slices.Sort(names)
		names = slices.Compact(names)
		for start := 0; start < len(names); start += 500 {
			h.check(names[start:min(start+500, len(names))])
		}
	}
}

// minPoll is how often the poller looks at a lock just begun to be
// watched.
const minPoll = 2 * time.Millisecond

// nextPoll is how long the poller waits before its next look.
func (h *hub) nextPoll() time.Duration {
	every := h.s.cfg.poll
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, t := range h.since {
		every = min(every, max(time.Since(t)/8, minPoll))
	}
	return every
}

// check reads the rows of names and tells the watchers of those that
// changed since the last look.
func (h *hub) check(names []string) {
	ctx, cancel := context.WithTimeout(h.ctx, 10*time.Second)
	defer cancel()
	rows, now, err := h.s.db.read(ctx, names)
	if err != nil {
		return // the next round tries again; the engine retries at the holder's lease
	}
	for _, r := range rows {
		h.mu.Lock()
		changed := h.revs[r.name] != r.rev
		h.revs[r.name] = r.rev
		h.mu.Unlock()
		if !changed {
			continue
		}
		h.deliver(notice{Type: noticeRelease, Name: r.name})
		if r.state.Kind == "mutex" {
			continue
		}
		for _, x := range r.state.Holders {
			if x.Until > now && !x.Revoked {
				h.deliver(notice{Type: noticeGrant, Name: r.name, Grantee: store.GranteeID(x.Owner), Token: x.Token,
					Seq: x.GSeq, Lease: x.GLease})
			}
		}
		if x := r.state.leader(now); x != nil {
			h.deliver(notice{Type: noticeLeader, Name: r.name, Term: x.Token, Value: x.Value,
				ID: store.OwnerID(x.Owner), Host: x.Host, PID: x.PID, Since: x.Since})
		} else if h.watched(r.name) {
			h.deliver(notice{Type: noticeLeader, Name: r.name, Ended: r.token}) // nobody leads
		}
	}
}

// watched reports whether anyone observes the election name.
func (h *hub) watched(name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.leaders[name]) > 0
}

// baseline records the current rev of name, so that the poller tells of
// changes after this call (a row that does not exist yet has rev 0).
func (h *hub) baseline(ctx context.Context, name string) error {
	if h.pushing() {
		return nil
	}
	rows, _, err := h.s.db.read(ctx, []string{name})
	if err != nil {
		return backendErr(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.revs[name]; !ok {
		h.revs[name] = 0
		if len(rows) > 0 {
			h.revs[name] = rows[0].rev
		}
		h.since[name] = time.Now()
		select {
		case h.kick <- struct{}{}:
		default:
		}
	}
	return nil
}

// forget drops the poller's record of name once nobody watches it.
func (h *hub) forget(name string) {
	if len(h.wakers[name]) == 0 && len(h.leaders[name]) == 0 {
		delete(h.revs, name)
		delete(h.since, name)
	}
}

// Watch implements store.Store. On PostgreSQL, a lock's releases and
// grants are pushed (NOTIFY, sent when the step's transaction commits);
// elsewhere the store polls the rows of the locks watched.
func (s *Store) Watch(ctx context.Context, name string, kind store.Kind, wake func(store.Notice)) (func(), error) {
	if err := s.hub.start(ctx); err != nil {
		return nil, err
	}
	h := s.hub
	w := &wake
	if err := h.baseline(ctx, name); err != nil {
		return nil, err
	}
	return join(h, h.wakers, name, w), nil
}

// join adds w to the watchers of name in m (a map of the hub's), and
// returns the function that takes it out again.
func join[W comparable](h *hub, m map[string]map[W]struct{}, name string, w W) func() {
	h.mu.Lock()
	if m[name] == nil {
		m[name] = map[W]struct{}{}
	}
	m[name][w] = struct{}{}
	h.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			delete(m[name], w)
			if len(m[name]) == 0 {
				delete(m, name)
			}
			h.forget(name)
		})
	}
}

// WatchRevoked implements store.RevokeWatcher. Where the store polls, only
// the revocations made through this store are told at once; the others
// are found at the holder's next renewal.
func (s *Store) WatchRevoked(ctx context.Context, fn func(name, grantee string)) (func(), error) {
	if err := s.hub.start(ctx); err != nil {
		return nil, err
	}
	h := s.hub
	f := &fn
	h.mu.Lock()
	h.revokers[f] = struct{}{}
	h.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			delete(h.revokers, f)
			h.mu.Unlock()
		})
	}, nil
}

// WatchLeader implements store.LeaderWatcher. Where the store polls, an
// observer hears the leader each poll finds, which may skip a leader that
// led between two polls.
func (s *Store) WatchLeader(ctx context.Context, name string, fn func(store.Announcement, bool)) (func(), error) {
	if err := s.hub.start(ctx); err != nil {
		return nil, err
	}
	h := s.hub
	if err := h.baseline(ctx, name); err != nil {
		return nil, err
	}
	return join(h, h.leaders, name, &leaderWatch{fn: fn}), nil
}
