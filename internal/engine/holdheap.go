package engine

import "time"

// holdHeap orders the renewer's holds by their next event (Hold.next), the
// earliest first. Each entry keeps its hold's key beside the pointer, so
// that ordering a million holds reads one array and not a million holds;
// a hold knows its position (Hold.index, -1 when not in the heap).
type holdHeap []heapEntry

type heapEntry struct {
	next time.Duration // h.next when h was last pushed or fixed
	h    *Hold
}

// push adds h.
func (q *holdHeap) push(h *Hold) {
	h.index = len(*q)
	*q = append(*q, heapEntry{h.next, h})
	q.up(h.index)
}

// pop removes and returns the hold of the earliest event; q must not be
// empty.
func (q *holdHeap) pop() *Hold {
	h := (*q)[0].h
	q.remove(h)
	return h
}

// remove takes h out.
func (q *holdHeap) remove(h *Hold) {
	old := *q
	i, last := h.index, len(old)-1
	if i != last {
		q.swap(i, last)
	}
	old[last] = heapEntry{}
	*q = old[:last]
	h.index = -1
	if i != last {
		q.fix((*q)[i].h)
	}
}

// fix restores the order after h.next changed.
func (q holdHeap) fix(h *Hold) {
	i := h.index
	q[i].next = h.next
	if !q.down(i) {
		q.up(i)
	}
}

func (q holdHeap) swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].h.index, q[j].h.index = i, j
}

func (q holdHeap) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if q[parent].next <= q[i].next {
			return
		}
		q.swap(i, parent)
		i = parent
	}
}

// down moves entry i down to its place and reports whether it moved.
func (q holdHeap) down(i int) bool {
	start, n := i, len(q)
	for {
		child := 2*i + 1
		if child >= n || child < 0 {
			break
		}
		if right := child + 1; right < n && q[right].next < q[child].next {
			child = right
		}
		if q[i].next <= q[child].next {
			break
		}
		q.swap(i, child)
		i = child
	}
	return i > start
}

// due counts the holds whose next event is at or before now: the top of
// the heap, visited without reading a hold.
func (q holdHeap) due(now time.Duration) int {
	n := 0
	var stack [64]int // a path down the heap, and the siblings left on it
	top := 0
	if len(q) > 0 {
		stack[0], top = 0, 1
	}
	for top > 0 {
		top--
		i := stack[top]
		if q[i].next > now {
			continue
		}
		n++
		for _, c := range [2]int{2*i + 2, 2*i + 1} {
			if c < len(q) && top < len(stack) {
				stack[top] = c
				top++
			}
		}
	}
	return n
}
