package harness

import (
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// A Guard checks mutual exclusion while a contended scenario runs. Every
// holder calls Enter (EnterShared for a reader of a read-write lock) right
// after acquiring and Exit (ExitShared) right before releasing. It counts
// violations (an exclusive holder entering while anyone is inside, or a
// shared holder entering while an exclusive one is inside), owner changes
// (an exclusive holder other than the previous one) and the most holders
// inside at once. Its counters live in memory shared by every process of a
// scenario: a file mapped with MAP_SHARED, so worker processes check
// against each other.
//
// A semaphore's holders use EnterPermits and ExitPermits instead: a holder
// of n permits adds n to a count of permits inside, and an entry that
// takes that count above the capacity is a violation. The guard records
// the most permits inside at once. The two kinds of entries are counted
// apart: a scenario uses one or the other.
type Guard struct {
	w    *[guardWords]int64
	mem  []byte // the mapping, when shared
	path string // the file, when this Guard created it
}

const (
	gInside = iota // exclusive holders inside << 32 | shared holders inside
	gViolations
	gLast
	gChanges
	gEntries
	gMax        // the most holders inside at once
	gEmptied    // unix ns of the last exit that left no holder inside
	gPermits    // permits inside (EnterPermits)
	gMaxPermits // the most permits inside at once
	guardWords  = 10
)

// exclusive is one exclusive holder in the gInside word.
const exclusive = 1 << 32

// holders is the number of holders, of both kinds, in a gInside value.
func holders(v int64) int64 { return v>>32 + v&(exclusive-1) }

const guardSize = guardWords * 8

// NewLocalGuard returns a Guard for the goroutines of one process.
func NewLocalGuard() *Guard { return &Guard{w: new([guardWords]int64)} }

// NewSharedGuard creates a Guard in a new temporary file, for worker
// processes to open with OpenGuard(g.Path()). Close removes the file.
func NewSharedGuard() (*Guard, error) {
	f, err := os.CreateTemp("", "lockbench-guard-")
	if err != nil {
		return nil, err
	}
	path := f.Name()
	err = f.Truncate(guardSize)
	f.Close()
	if err != nil {
		os.Remove(path)
		return nil, err
	}
	g, err := OpenGuard(path)
	if err != nil {
		os.Remove(path)
		return nil, err
	}
	g.path = path
	return g, nil
}

// OpenGuard maps the Guard file at path.
func OpenGuard(path string) (*Guard, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	mem, err := syscall.Mmap(int(f.Fd()), 0, guardSize, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %s: %w", path, err)
	}
	return &Guard{w: (*[guardWords]int64)(unsafe.Pointer(&mem[0])), mem: mem}, nil
}

// Path is the file of a shared Guard.
func (g *Guard) Path() string { return g.path }

// Enter records that owner (> 0, unique per worker) now holds the lock.
func (g *Guard) Enter(owner int64) {
	v := atomic.AddInt64(&g.w[gInside], exclusive)
	if v != exclusive {
		atomic.AddInt64(&g.w[gViolations], 1)
	}
	g.entered(v)
	if prev := atomic.SwapInt64(&g.w[gLast], owner); prev != 0 && prev != owner {
		atomic.AddInt64(&g.w[gChanges], 1)
	}
}

// Exit records that the exclusive holder is about to release.
func (g *Guard) Exit() { g.exited(atomic.AddInt64(&g.w[gInside], -exclusive)) }

// EnterShared records that one more reader holds the lock: other readers
// may be inside, an exclusive holder may not.
func (g *Guard) EnterShared() {
	v := atomic.AddInt64(&g.w[gInside], 1)
	if v >= exclusive {
		atomic.AddInt64(&g.w[gViolations], 1)
	}
	g.entered(v)
}

// ExitShared records that a reader is about to release.
func (g *Guard) ExitShared() { g.exited(atomic.AddInt64(&g.w[gInside], -1)) }

// EnterPermits records that a holder now holds n permits of a semaphore
// of capacity permits: more than capacity inside at once is a violation.
func (g *Guard) EnterPermits(n, capacity int64) {
	v := atomic.AddInt64(&g.w[gPermits], n)
	if v > capacity {
		atomic.AddInt64(&g.w[gViolations], 1)
	}
	atomic.AddInt64(&g.w[gEntries], 1)
	for {
		m := atomic.LoadInt64(&g.w[gMaxPermits])
		if v <= m || atomic.CompareAndSwapInt64(&g.w[gMaxPermits], m, v) {
			return
		}
	}
}

// ExitPermits records that a holder of n permits is about to release
// them.
func (g *Guard) ExitPermits(n int64) {
	if atomic.AddInt64(&g.w[gPermits], -n) == 0 {
		atomic.StoreInt64(&g.w[gEmptied], time.Now().UnixNano())
	}
}

// Permits is the number of permits inside now.
func (g *Guard) Permits() int64 { return atomic.LoadInt64(&g.w[gPermits]) }

// MaxPermits is the most permits that were inside at once.
func (g *Guard) MaxPermits() int64 { return atomic.LoadInt64(&g.w[gMaxPermits]) }

// exited notes the time of an exit that left v in gInside, if none is
// left inside.
func (g *Guard) exited(v int64) {
	if v == 0 {
		atomic.StoreInt64(&g.w[gEmptied], time.Now().UnixNano())
	}
}

// Emptied is when the last holder to leave left no one inside (0 if none
// has left yet).
func (g *Guard) Emptied() time.Time {
	if ns := atomic.LoadInt64(&g.w[gEmptied]); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// entered counts an entry that left v in gInside.
func (g *Guard) entered(v int64) {
	atomic.AddInt64(&g.w[gEntries], 1)
	n := holders(v)
	for {
		m := atomic.LoadInt64(&g.w[gMax])
		if n <= m || atomic.CompareAndSwapInt64(&g.w[gMax], m, n) {
			return
		}
	}
}

// Holders is the number of holders inside now, of both kinds.
func (g *Guard) Holders() int64 { return holders(atomic.LoadInt64(&g.w[gInside])) }

// MaxHolders is the most holders that were inside at once.
func (g *Guard) MaxHolders() int64 { return atomic.LoadInt64(&g.w[gMax]) }

// Violations counts entries while another holder was inside (for
// EnterPermits: entries that took the permits inside above the capacity).
func (g *Guard) Violations() int64 { return atomic.LoadInt64(&g.w[gViolations]) }

// OwnerChanges counts entries by an owner other than the previous one.
func (g *Guard) OwnerChanges() int64 { return atomic.LoadInt64(&g.w[gChanges]) }

// Entries counts all entries, of both kinds.
func (g *Guard) Entries() int64 { return atomic.LoadInt64(&g.w[gEntries]) }

// Reset zeroes the counters.
func (g *Guard) Reset() {
	for i := range g.w {
		atomic.StoreInt64(&g.w[i], 0)
	}
}

// Close unmaps a shared Guard and removes the file it created.
func (g *Guard) Close() error {
	var err error
	if g.mem != nil {
		err = syscall.Munmap(g.mem)
		g.mem = nil
	}
	if g.path != "" {
		os.Remove(g.path)
	}
	return err
}
