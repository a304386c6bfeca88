package engine

import "context"

// acquireEach is AcquireAll on a backend that takes one lock at a time.
func acquireEach(ctx context.Context, b Backend, rs []Request) ([]Grant, error) {
	var gs []Grant
	for _, r := range rs {
		g, err := b.Acquire(ctx, r)
		if err != nil {
			return gs, err
		}
		gs = append(gs, g)
		if !g.Acquired {
			return gs, nil
		}
	}
	return gs, nil
}
