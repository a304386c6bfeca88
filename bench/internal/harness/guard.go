package harness

import (
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// A Guard checks mutual exclusion while a contended scenario runs. Every
// holder calls Enter right after acquiring and Exit right before
// releasing. It counts violations (a holder entering while another is
// inside) and owner changes (a holder other than the previous one). Its
// counters live in memory shared by every process of a scenario: a file
// mapped with MAP_SHARED, so worker processes check against each other.
type Guard struct {
	w    *[guardWords]int64
	mem  []byte // the mapping, when shared
	path string // the file, when this Guard created it
}

const (
	gInside = iota
	gViolations
	gLast
	gChanges
	gEntries
	guardWords = 8
)

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
	if atomic.AddInt64(&g.w[gInside], 1) != 1 {
		atomic.AddInt64(&g.w[gViolations], 1)
	}
	atomic.AddInt64(&g.w[gEntries], 1)
	if prev := atomic.SwapInt64(&g.w[gLast], owner); prev != 0 && prev != owner {
		atomic.AddInt64(&g.w[gChanges], 1)
	}
}

// Exit records that the holder is about to release.
func (g *Guard) Exit() { atomic.AddInt64(&g.w[gInside], -1) }

// Violations counts entries while another holder was inside.
func (g *Guard) Violations() int64 { return atomic.LoadInt64(&g.w[gViolations]) }

// OwnerChanges counts entries by an owner other than the previous one.
func (g *Guard) OwnerChanges() int64 { return atomic.LoadInt64(&g.w[gChanges]) }

// Entries counts all entries.
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
