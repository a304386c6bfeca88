package redistest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

const (
	// readyTimeout bounds how long a server may take to accept commands.
	readyTimeout = 10 * time.Second
	// pollInterval is the delay between readiness probes.
	pollInterval = 5 * time.Millisecond
	// probeTimeout bounds one readiness probe.
	probeTimeout = time.Second
)

// errPortInUse reports that the chosen port was taken by another process.
var errPortInUse = errors.New("port already in use")

// errExited reports that the server exited before becoming ready.
var errExited = errors.New("redis-server exited before becoming ready")

// waitReady polls addr until the server started as p answers, p exits, or
// readyTimeout elapses.
func waitReady(p *process, addr, password string) error {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	// Abort an in-flight probe as soon as p exits: if another process holds
	// the port, the probe may be talking to it, and it may never answer.
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
		ready, err := probe(ctx, addr, password, p.pid())
		if ready && !p.exited() {
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
			return fmt.Errorf("redis-server not ready after %v: %w", readyTimeout, err)
		}
	}
}

// probe connects to addr, authenticates if password is set, and asks for
// INFO server. It reports whether the server is ready to accept commands.
// If INFO shows a process other than pid, it returns an error wrapping
// errPortInUse. If the server answers INFO with an error other than LOADING
// (for example because a password was set with WithArgs instead of
// WithPassword), the server is taken to be ready without checking its pid.
// The probe is abandoned when ctx is done.
func probe(ctx context.Context, addr, password string, pid int) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	var req bytes.Buffer
	if password != "" {
		writeCommand(&req, "AUTH", password)
	}
	writeCommand(&req, "INFO", "server")
	if _, err := conn.Write(req.Bytes()); err != nil {
		return false, err
	}

	r := bufio.NewReader(conn)
	if password != "" {
		// A failed AUTH shows up again as NOAUTH in the INFO reply.
		if _, err := readReply(r); err != nil && !isServerError(err) {
			return false, err
		}
	}
	info, err := readReply(r)
	switch {
	case isServerError(err) && strings.HasPrefix(err.Error(), "LOADING"):
		return false, err
	case isServerError(err):
		return true, nil
	case err != nil:
		return false, err
	}
	got, ok := infoPID(info)
	if !ok {
		return true, nil
	}
	if got != pid {
		return false, fmt.Errorf("%w: %s is served by pid %d, not by our pid %d", errPortInUse, addr, got, pid)
	}
	return true, nil
}

// infoPID extracts process_id from an INFO reply.
func infoPID(info string) (int, bool) {
	for line := range strings.Lines(info) {
		v, ok := strings.CutPrefix(line, "process_id:")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		return n, err == nil
	}
	return 0, false
}

// writeCommand appends a command in RESP form to b.
func writeCommand(b *bytes.Buffer, args ...string) {
	fmt.Fprintf(b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(b, "$%d\r\n%s\r\n", len(a), a)
	}
}

// serverError is an error reply from the server.
type serverError string

func (e serverError) Error() string { return string(e) }

func isServerError(err error) bool {
	var se serverError
	return errors.As(err, &se)
}

// maxBulk bounds the size of a bulk reply the probe will read.
const maxBulk = 1 << 20

// readReply reads one simple-string, error or bulk-string reply.
func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", fmt.Errorf("empty reply line")
	}
	switch line[0] {
	case '+':
		return line[1:], nil
	case '-':
		return "", serverError(line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n > maxBulk {
			return "", fmt.Errorf("bad bulk length %q", line)
		}
		if n < 0 {
			return "", nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}
