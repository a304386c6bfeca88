package sqltest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"
)

const (
	// readyTimeout bounds how long a server may take to accept
	// connections, crash recovery included.
	readyTimeout = 30 * time.Second
	// pollInterval is the delay between readiness probes.
	pollInterval = 10 * time.Millisecond
	// probeTimeout bounds one readiness probe.
	probeTimeout = 2 * time.Second
)

// errPortInUse reports that the chosen port was taken by another process.
var errPortInUse = errors.New("port already in use")

// errExited reports that the server exited before becoming ready.
var errExited = errors.New("exited before becoming ready")

// A probeFunc connects to the server on port, runs a query and returns
// nil if the server that answered is the one whose readiness is awaited,
// or an error wrapping errPortInUse if another server answered.
type probeFunc func(ctx context.Context, port int) error

// waitReady probes the server started as p on port until it answers, p
// exits, or readyTimeout elapses.
func waitReady(p *process, port int, probe probeFunc) error {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	// Abort an in-flight probe as soon as p exits: if another process
	// holds the port, the probe may be talking to it.
	go func() {
		select {
		case <-p.done:
			cancel()
		case <-ctx.Done():
		}
	}()

	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		pctx, pcancel := context.WithTimeout(ctx, probeTimeout)
		err := probe(pctx, port)
		pcancel()
		if err == nil && !p.exited() {
			return nil
		}
		if errors.Is(err, errPortInUse) {
			return err
		}
		select {
		case <-tick.C:
			continue
		case <-ctx.Done():
		}
		select {
		case <-p.done:
			return fmt.Errorf("%w: %v", errExited, p.err)
		default:
			return fmt.Errorf("not ready after %v: %w", readyTimeout, err)
		}
	}
}

// freePort returns a port of 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, err
	}
	return port, nil
}
