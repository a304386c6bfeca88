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
// whose hooks pass every message and subscription to events. A
// connection that dies is replaced, and the channels subscribed again
// (their confirmations come as events, as they do on go-redis), until
// the pubSub is closed. A sharded one (SSUBSCRIBE) is on the master of its
// channels' slot, which rueidis picks at its first command: its channels
// all live in one slot (the backend groups them so).
type pubSub struct {
	client  rueidis.Client
	sharded bool
	events  chan redisbackend.Event
	done    chan struct{} // closed by Close

	mu       sync.Mutex
	channels map[string]bool         // subscribed, or to subscribe again on a new connection
	dc       rueidis.DedicatedClient // nil until the first Subscribe, and while connecting again
	release  func()
	closed   bool
	wg       sync.WaitGroup
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

// connect makes a dedicated connection with p's hooks, and watches it
// until it dies, then connects again; p.mu is held.
func (p *pubSub) connect() rueidis.DedicatedClient {
	dc, release := p.client.Dedicate()
	died := dc.SetPubSubHooks(p.hooks())
	p.dc, p.release = dc, release
	p.wg.Add(1)
	go p.watch(dc, died)
	return dc
}

// watch waits for the connection dc to die (or to be released), and then,
// unless p is closed, connects again and subscribes p's channels there,
// backing off between failed tries.
func (p *pubSub) watch(dc rueidis.DedicatedClient, died <-chan error) {
	defer p.wg.Done()
	err, ok := <-died
	if !ok || err == nil {
		return // released: closed, or replaced
	}
	delay := 50 * time.Millisecond
	for {
		p.mu.Lock()
		if p.closed || p.dc != dc {
			p.mu.Unlock()
			return
		}
		p.release()
		channels := make([]string, 0, len(p.channels))
		for ch := range p.channels {
			channels = append(channels, ch)
		}
		next := p.connect()
		p.mu.Unlock()
		if len(channels) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := next.Do(ctx, p.subscribe(next, channels)).Error()
		cancel()
		if err == nil {
			return // next's own watch takes over
		}
		dc = next
		select {
		case <-time.After(delay):
		case <-p.done:
			return
		}
		delay = min(2*delay, time.Second)
	}
}

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
	if dc == nil {
		dc = p.connect()
	}
	p.mu.Unlock()
	return dc.Do(ctx, p.subscribe(dc, channels)).Error()
}

// subscribe returns the command that subscribes to channels on dc.
func (p *pubSub) subscribe(dc rueidis.DedicatedClient, channels []string) rueidis.Completed {
	if p.sharded {
		return dc.B().Ssubscribe().Channel(channels...).Build()
	}
	return dc.B().Subscribe().Channel(channels...).Build()
}

func (p *pubSub) Unsubscribe(ctx context.Context, channel string) error {
	p.mu.Lock()
	delete(p.channels, channel)
	dc := p.dc
	p.mu.Unlock()
	if dc == nil {
		return nil
	}
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

func (p *pubSub) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.done)
	if p.release != nil {
		p.release()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}
