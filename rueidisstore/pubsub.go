package rueidisstore

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/distlock/distlock/internal/redisbackend"
	"github.com/redis/rueidis"
)

func (c *conn) Subscribe(sharded bool) redisbackend.PubSub {
	return &pubSub{client: c.client, sharded: sharded, channels: map[string]bool{}, events: make(chan redisbackend.Event, 1024),
		done: make(chan struct{})}
}

// pubSub is a redisbackend.PubSub on a dedicated rueidis connection,
// whose hooks pass every message and subscription to events. One
// goroutine (supervise) replaces a connection that dies, backing off
// between tries, and subscribes the channels again (their confirmations
// come as events, as they do on go-redis), until the pubSub is closed. A
// sharded one (SSUBSCRIBE) is on the master of its channels' slot, which
// rueidis picks at its first command: its channels all live in one slot
// (the backend groups them so).
//
// A dedicated connection comes from rueidis's pool of connections for
// blocking commands, which WAIT under replica acknowledgement uses too
// (1,024 per node by default, ClientOption.BlockingPoolSize): each
// PubSub keeps one for as long as it lasts, one per process, and on a
// Cluster one per slot with waiters in the process.
type pubSub struct {
	client  rueidis.Client
	sharded bool
	events  chan redisbackend.Event
	done    chan struct{} // closed by Close

	mu       sync.Mutex
	channels map[string]bool         // subscribed, or to subscribe again on a new connection
	dc       rueidis.DedicatedClient // nil until the first Subscribe
	release  func()                  // dc's
	died     <-chan error            // dc's hooks' end: an error if its connection died
	closed   bool
	wg       sync.WaitGroup // supervise
}

// push passes e to the reader, unless the pubSub is closed.
func (p *pubSub) push(e redisbackend.Event) {
	select {
	case p.events <- e:
	case <-p.done:
	}
}

func (p *pubSub) hooks() rueidis.PubSubHooks {
	return rueidis.PubSubHooks{
		OnMessage: func(m rueidis.PubSubMessage) {
			p.push(redisbackend.Event{Kind: redisbackend.Message, Channel: m.Channel, Payload: m.Message})
		},
		OnSubscription: func(s rueidis.PubSubSubscription) {
			switch s.Kind {
			case "subscribe", "ssubscribe":
				p.push(redisbackend.Event{Kind: redisbackend.Subscribed, Channel: s.Channel})
			case "unsubscribe", "sunsubscribe":
				p.push(redisbackend.Event{Kind: redisbackend.Unsubscribed, Channel: s.Channel})
			}
		},
	}
}

// connect makes a dedicated connection with p's hooks (outside p.mu:
// rueidis may dial there) and makes it p's, releasing the one before. It
// returns nil if p was closed meanwhile.
func (p *pubSub) connect() rueidis.DedicatedClient {
	dc, release := p.client.Dedicate()
	died := dc.SetPubSubHooks(p.hooks())
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		release()
		return nil
	}
	old := p.release
	first := p.dc == nil
	p.dc, p.release, p.died = dc, release, died
	if first {
		p.wg.Add(1)
		go p.supervise()
	}
	p.mu.Unlock()
	if old != nil {
		old()
	}
	return dc
}

// supervise waits for p's connection to die, then connects again and
// subscribes p's channels there, backing off between failed tries (the
// connection's own end, when its server is down, comes at once), until p
// is closed.
func (p *pubSub) supervise() {
	defer p.wg.Done()
	delay := minBackoff
	for {
		p.mu.Lock()
		died := p.died
		p.mu.Unlock()
		select {
		case err := <-died:
			if err == nil { // released (p replaced it, or Close)
				p.mu.Lock()
				replaced := p.died != died
				p.mu.Unlock()
				if replaced {
					continue
				}
			}
		case <-p.done:
			return
		}
		for {
			select {
			case <-time.After(delay):
			case <-p.done:
				return
			}
			delay = min(2*delay, maxBackoff)
			next := p.connect()
			if next == nil {
				return
			}
			p.mu.Lock()
			channels := make([]string, 0, len(p.channels))
			for ch := range p.channels {
				channels = append(channels, ch)
			}
			p.mu.Unlock()
			if len(channels) == 0 {
				break
			}
			ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
			err := next.Do(ctx, p.subscribe(next, channels)).Error()
			cancel()
			if err == nil {
				delay = minBackoff
				break
			}
		}
	}
}

// A pubSub connects again after minBackoff, then twice that, up to
// maxBackoff; commandTimeout bounds its own commands (a subscription
// again, an unsubscription).
const (
	minBackoff     = 50 * time.Millisecond
	maxBackoff     = time.Second
	commandTimeout = time.Second
)

func (p *pubSub) Subscribe(ctx context.Context, channels ...string) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return rueidis.ErrClosing
	}
	for _, ch := range channels {
		p.channels[ch] = true
	}
	dc := p.dc
	p.mu.Unlock()
	fresh := dc == nil
	if fresh {
		if dc = p.connect(); dc == nil {
			return rueidis.ErrClosing
		}
	}
	err := dc.Do(ctx, p.subscribe(dc, channels)).Error()
	if _, refused := rueidis.IsRedisErr(err); err != nil && !fresh && !refused && ctx.Err() == nil {
		p.mu.Lock()
		closed := p.closed
		p.mu.Unlock()
		if !closed {
			// The connection that worked is gone (or was just replaced):
			// supervise subscribes p's channels, these among them, on the
			// next one, and the confirmation comes as an event, as
			// go-redis's does when it subscribes again after a
			// reconnection. (A first connection's failure is the error.)
			return nil
		}
	}
	return err
}

// subscribe returns the command that subscribes to channels on dc.
func (p *pubSub) subscribe(dc rueidis.DedicatedClient, channels []string) rueidis.Completed {
	if p.sharded {
		return dc.B().Ssubscribe().Channel(channels...).Build()
	}
	return dc.B().Subscribe().Channel(channels...).Build()
}

// Unsubscribe waits commandTimeout at most for the server's answer:
// rueidis waits for it, where go-redis only writes the command, and the
// backend calls it while other watches wait.
func (p *pubSub) Unsubscribe(ctx context.Context, channel string) error {
	p.mu.Lock()
	delete(p.channels, channel)
	dc := p.dc
	p.mu.Unlock()
	if dc == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	if p.sharded {
		return dc.Do(ctx, dc.B().Sunsubscribe().Channel(channel).Build()).Error()
	}
	return dc.Do(ctx, dc.B().Unsubscribe().Channel(channel).Build()).Error()
}

func (p *pubSub) Receive(ctx context.Context, timeout time.Duration) (redisbackend.Event, error) {
	var expired <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	select {
	case e := <-p.events:
		return e, nil
	case <-expired:
		return redisbackend.Event{}, context.DeadlineExceeded
	case <-ctx.Done():
		return redisbackend.Event{}, ctx.Err()
	case <-p.done:
		return redisbackend.Event{}, errClosed
	}
}

var errClosed = errors.New("rueidisstore: pub/sub connection closed")

func (p *pubSub) Run(fn func(redisbackend.Event)) {
	for {
		select {
		case e := <-p.events:
			fn(e)
		case <-p.done:
			return
		}
	}
}

// Close ends the reader and the supervisor first (hooks blocked on a full
// channel of events give up), then releases the connection, outside p.mu.
func (p *pubSub) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.done)
	release := p.release
	p.mu.Unlock()
	if release != nil {
		release()
	}
	p.wg.Wait()
	return nil
}
