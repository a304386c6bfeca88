package distlock_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
)

// candidate is the body of a "candidate" helper process: it observes the
// election name (printing "observed TERM VALUE" for each change) and
// campaigns with value, over and over: it prints "leading TERM" when it
// leads, then "resigned TERM" when told "resign" on stdin (and campaigns
// again), or "lost TERM" when its lease context ends.
func candidate(ctx context.Context, c *distlock.Client, name, value string, say func(string, ...any)) int {
	e := c.Election(name, distlock.WithTTL(time.Second))
	go func() {
		for l := range e.Observe(ctx) {
			say("observed %d %s", l.Term, l.Value)
		}
	}()
	resign := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			if sc.Text() == "resign" {
				resign <- struct{}{}
			}
		}
	}()
	for {
		l, err := e.Campaign(ctx, value)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		say("leading %d", l.Token())
		select {
		case <-resign:
			if err := l.Unlock(ctx); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			say("resigned %d", l.Token())
		case <-l.Context().Done():
			say("lost %d", l.Token())
		}
	}
}

// A candidate process, its events and what its observer saw.
type candidateProc struct {
	h      *helper
	events chan []string // leading, resigned, lost
	mu     sync.Mutex
	seen   []uint64 // observed terms, vacancies (0) left out
}

// observed returns a copy of the terms the candidate's observer saw.
func (c *candidateProc) observed() []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.seen)
}

func startCandidate(t *testing.T, srv *redistest.Server, value string) *candidateProc {
	c := &candidateProc{h: startHelper(t, "candidate", srv.URL(), "leader", value), events: make(chan []string, 100)}
	go func() {
		for line := range c.h.lines {
			f := strings.Fields(line)
			switch {
			case len(f) >= 2 && f[0] == "observed":
				var term uint64
				fmt.Sscan(f[1], &term)
				if term != 0 {
					c.mu.Lock()
					c.seen = append(c.seen, term)
					c.mu.Unlock()
				}
			case len(f) == 2:
				c.events <- f
			}
		}
	}()
	return c
}

// next waits for the candidate's next event, which must be word.
func (c *candidateProc) next(t *testing.T, word string) uint64 {
	t.Helper()
	select {
	case f := <-c.events:
		if f[0] != word {
			t.Fatalf("candidate: %v, want %s", f, word)
		}
		var term uint64
		fmt.Sscan(f[1], &term)
		return term
	case <-time.After(30 * time.Second):
		t.Fatalf("candidate: no %s within 30 s", word)
	}
	return 0
}

// Three candidates in three processes. The leader resigns, then a leader
// is SIGKILLed, then one is SIGSTOPped: each time the next candidate leads,
// with a greater term; the paused one, resumed, finds its lease lost; every
// observer that was never paused saw every leader, in order; and the paused
// one's saw leaders in order, up to the last. (A process resumed from a
// pause may look at the election before it reads the news that waited for
// it, and Observe drops news older than what it said: it can skip leaders
// of the pause, even its own term, but never go back or miss the present.)
func TestElectionAcrossProcesses(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	ctx := testCtx(t)
	e := c.Election("leader")
	var mu sync.Mutex
	var seen []distlock.Leader
	octx, stopObserving := context.WithCancel(ctx)
	observed := make(chan struct{})
	go func() {
		defer close(observed)
		for l := range e.Observe(octx) {
			mu.Lock()
			seen = append(seen, l)
			mu.Unlock()
		}
	}()
	if _, err := e.Leader(ctx); !errors.Is(err, distlock.ErrNotHeld) {
		t.Fatalf("Leader with no candidate: %v, want ErrNotHeld", err)
	}
	rdb := srv.Client(t)
	queued := func(n int64) { // candidates waiting in the election's queue
		waitFor(t, func() bool { return rdb.ZCard(ctx, redisstore.DefaultPrefix+"{leader}:q").Val() == n })
	}
	c1 := startCandidate(t, srv, "c1")
	t1 := c1.next(t, "leading")
	c2 := startCandidate(t, srv, "c2")
	queued(1)
	c3 := startCandidate(t, srv, "c3")
	queued(2)
	if l, err := e.Leader(ctx); err != nil || l.Term != t1 || l.Value != "c1" || l.Holder.PID != c1.h.cmd.Process.Pid {
		t.Fatalf("Leader = %+v, %v; want c1 with term %d", l, err, t1)
	}

	c1.h.send(t, "resign") // c2 leads; c1 queues again, behind c3
	if got := c1.next(t, "resigned"); got != t1 {
		t.Fatalf("resigned %d, want %d", got, t1)
	}
	t2 := c2.next(t, "leading")
	c2.h.signal(t, syscall.SIGKILL) // c3 leads once c2's lease ends
	t3 := c3.next(t, "leading")
	c3.h.signal(t, syscall.SIGSTOP) // c1 leads once c3's lease ends
	t4 := c1.next(t, "leading")
	c3.h.signal(t, syscall.SIGCONT)
	if got := c3.next(t, "lost"); got != t3 {
		t.Fatalf("the resumed leader lost %d, want %d", got, t3)
	}
	queued(1)              // c3 campaigns again
	c1.h.send(t, "resign") // c3 leads
	c1.next(t, "resigned")
	t5 := c3.next(t, "leading")
	terms := []uint64{t1, t2, t3, t4, t5}
	for i := 1; i < len(terms); i++ {
		if terms[i] <= terms[i-1] {
			t.Fatalf("terms %v do not strictly increase", terms)
		}
	}
	if l, err := e.Leader(ctx); err != nil || l.Term != t5 || l.Value != "c3" {
		t.Fatalf("Leader = %+v, %v; want c3 with term %d", l, err, t5)
	}

	// Every live observer saw t1..t5, in order (a vacancy may show between
	// a killed or paused leader and its successor).
	check := func(who string, got []uint64) {
		if !slices.Equal(got, terms) {
			t.Errorf("%s observed %v, want %v", who, got, terms)
		}
	}
	last := func(s []uint64) uint64 {
		if len(s) == 0 {
			return 0
		}
		return s[len(s)-1]
	}
	caughtUp := func() bool {
		if len(c1.observed()) < len(terms) || last(c3.observed()) != t5 {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		return len(seen) > 0 && seen[len(seen)-1].Term == t5
	}
	for deadline := time.Now().Add(30 * time.Second); !caughtUp(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			mu.Lock()
			mine := fmt.Sprint(seen)
			mu.Unlock()
			t.Fatalf("observers not caught up within 30 s of term %d; terms %v; the test's observer saw %s, c1's %v, c3's %v",
				t5, terms, mine, c1.observed(), c3.observed())
		}
	}
	stopObserving()
	<-observed
	var mine []uint64
	for _, l := range seen {
		if l.Term != 0 {
			mine = append(mine, l.Term)
			if l.Holder.ID == "" || l.Holder.PID == 0 || l.Value == "" {
				t.Errorf("observed leader without its holder: %+v", l)
			}
		}
	}
	check("the test's observer", mine)
	check("candidate 1's observer", c1.observed())
	// The paused candidate's: a subsequence of the terms, in order, ending
	// with the last.
	got, i := c3.observed(), 0
	for _, term := range got {
		for i < len(terms) && terms[i] != term {
			i++
		}
		if i == len(terms) {
			t.Fatalf("candidate 3's observer saw %v, not an in-order subsequence of %v", got, terms)
		}
		i++
	}
	if last(got) != t5 {
		t.Fatalf("candidate 3's observer saw %v, not ending with %d", got, t5)
	}
}

// A leader that resigns with no candidate waiting leaves the election
// without a leader, and observers are told (a zero Leader).
func TestElectionVacancyObserved(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	ctx := testCtx(t)
	e := c.Election("vacant")
	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := e.Observe(octx)
	if got := <-ch; got != (distlock.Leader{}) {
		t.Fatalf("observed %+v first, want a zero Leader: nobody leads", got)
	}
	l, err := e.Campaign(ctx, "me")
	if err != nil {
		t.Fatal(err)
	}
	if got := <-ch; got.Term != l.Token() || got.Value != "me" {
		t.Fatalf("observed %+v, want term %d", got, l.Token())
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if got := <-ch; got != (distlock.Leader{}) {
		t.Fatalf("observed %+v after the resignation, want a zero Leader", got)
	}
	cancel()
	for range ch {
	}
}

// TestElectionResign: Resign ends the leadership and the next candidate
// leads; a lease of another lock, or none, is refused and releases
// nothing.
func TestElectionResign(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	ctx := testCtx(t)
	e := c.Election("resign")
	lead, err := e.Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	other, err := c.Mutex("resign-other").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Resign(ctx, other); !errors.Is(err, distlock.ErrInvalidOption) {
		t.Errorf("Resign with a Mutex's lease: %v, want ErrInvalidOption", err)
	}
	if other.Context().Err() != nil {
		t.Error("Resign with a Mutex's lease released it")
	}
	if err := e.Resign(ctx, nil); !errors.Is(err, distlock.ErrNotHeld) {
		t.Errorf("Resign(nil): %v, want ErrNotHeld", err)
	}
	next := make(chan *distlock.Lease, 1)
	go func() {
		l, err := c.Election("resign").Campaign(ctx, "b")
		if err != nil {
			t.Error(err)
		}
		next <- l
	}()
	waitFor(t, func() bool { info, _ := c.Mutex("resign").Inspect(ctx); return info.Queued == 1 })
	if err := e.Resign(ctx, lead); err != nil {
		t.Fatal(err)
	}
	if lead.Context().Err() == nil {
		t.Error("the resigned leader's lease context is live")
	}
	l := <-next
	c2, _ := newClient(t, srv)
	if err := c2.Election("resign").Resign(ctx, l); !errors.Is(err, distlock.ErrInvalidOption) {
		t.Errorf("Resign with another Client's leadership: %v, want ErrInvalidOption", err)
	}
	if leader, err := e.Leader(ctx); err != nil || leader.Value != "b" || leader.Term != l.Token() {
		t.Errorf("Leader after Resign = %+v, %v; want b, term %d", leader, err, l.Token())
	}
	var de *distlock.Error
	if err := e.Resign(ctx, lead); !errors.Is(err, distlock.ErrNotHeld) || !errors.As(err, &de) || de.Op != "resign" {
		t.Errorf("second Resign: %v, want ErrNotHeld with op resign", err)
	}
	for _, l := range []*distlock.Lease{l, other} {
		if err := l.Unlock(ctx); err != nil {
			t.Error(err)
		}
	}
}
