package etcdstore

import (
	"context"
	"slices"
	"strings"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// A watched is a key or range whose changes may let a waiting place in.
type watched struct {
	key    string
	prefix bool // every key under key
	puts   bool // puts count as changes too, not only deletes
}

// before is what the place cs[i] waits for.
func before(cs []contender, i int) []watched {
	switch c := cs[i]; {
	case c.letter == 's':
		// Any release lets permits free.
		key := string(c.kv.Key)
		return []watched{{key: key[:strings.LastIndexByte(key, '/')+1], prefix: true}}
	case c.letter == 'w' && !c.writes():
		// A reader waits for the last writer before it to leave, or to
		// turn into a reader (a put).
		for j := i - 1; j >= 0; j-- {
			if cs[j].writes() {
				return []watched{{key: string(cs[j].kv.Key), puts: true}}
			}
		}
	}
	return []watched{{key: string(cs[i-1].kv.Key)}}
}

// options are w's watch options: from the server's current revision (a
// synced watch, see follow), and its creation reported.
func (w watched) options() []clientv3.OpOption {
	opts := []clientv3.OpOption{clientv3.WithCreatedNotify()}
	if w.prefix {
		opts = append(opts, clientv3.WithPrefix())
	}
	if !w.puts {
		opts = append(opts, clientv3.WithFilterPut())
	}
	return opts
}

// A watchSet is the watches of a waiting place, made before the read
// that they follow: it tells whether a change came after a revision.
type watchSet struct {
	of      []watched
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	changed chan struct{} // a change or an end since it was last drained

	// since is the revision the watches start after: every change after
	// it comes through them (the greatest revision the server reported
	// as current when it made one).
	since int64

	mu    sync.Mutex
	last  int64 // the revision of the last change seen
	ended bool  // a watch ended: changes may be lost from then on
}

// watchAll watches every one of of and returns once the server has
// created each watch: every change after a read sent from then on comes
// through them.
func (s *Store) watchAll(ctx context.Context, of []watched) (*watchSet, error) {
	if s.err != nil {
		return nil, s.err
	}
	wctx, cancel := context.WithCancel(ctx)
	ws := &watchSet{of: of, cancel: cancel, changed: make(chan struct{}, 1)}
	chans := make([]clientv3.WatchChan, len(of))
	for i, w := range of {
		chans[i] = s.cli.Watch(wctx, w.key, w.options()...)
	}
	for i, ch := range chans {
		select {
		case resp, ok := <-ch:
			if !ok || resp.Err() != nil || !resp.Created {
				cancel()
				return nil, backendErr(errWatch(of[i].key, resp.Err()))
			}
			ws.since = max(ws.since, resp.Header.Revision)
		case <-ctx.Done():
			cancel()
			return nil, backendErr(ctx.Err())
		}
	}
	ws.wg.Add(len(chans))
	for _, ch := range chans {
		go ws.follow(ch)
	}
	return ws, nil
}

// follow records the changes that come through ch until it ends.
func (ws *watchSet) follow(ch clientv3.WatchChan) {
	defer ws.wg.Done()
	for resp := range ch {
		if resp.Err() != nil || resp.Canceled {
			break
		}
		if n := len(resp.Events); n > 0 {
			// Events come in the order of their revisions; a delete's
			// ModRevision is the revision of the delete.
			ws.saw(resp.Events[n-1].Kv.ModRevision, false)
		}
	}
	ws.saw(0, true)
}

func (ws *watchSet) saw(rev int64, ended bool) {
	ws.mu.Lock()
	ws.last = max(ws.last, rev)
	ws.ended = ws.ended || ended
	ws.mu.Unlock()
	select {
	case ws.changed <- struct{}{}:
	default:
	}
}

// covers reports whether ws watches exactly of and none of its watches
// ended.
func (ws *watchSet) covers(of []watched) bool {
	if ws == nil {
		return false
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return !ws.ended && slices.Equal(ws.of, of)
}

// await returns the revision of the last change seen, at the first change
// after revision rev; 0 if a watch ended first, or ctx ended.
func (ws *watchSet) await(ctx context.Context, rev int64) int64 {
	for {
		ws.mu.Lock()
		last, ended := ws.last, ws.ended
		ws.mu.Unlock()
		switch {
		case ended:
			return 0
		case last > rev:
			return last
		}
		select {
		case <-ws.changed:
		case <-ctx.Done():
			return 0
		}
	}
}

// stop ends ws's watches (if any) and waits for their goroutines.
func (ws *watchSet) stop() {
	if ws == nil {
		return
	}
	ws.cancel()
	ws.wg.Wait()
}
