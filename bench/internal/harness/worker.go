package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Scenarios that need other processes re-execute the running binary (the
// lockbench command or the test binary) with the WorkerEnv variable set to
// a JSON WorkerSpec. The binary's main (or TestMain) calls
// RunWorkerIfRequested first thing; in a worker it runs the spec and exits.
//
// The protocol is line based: the worker prints "ready" on stdout when it
// is connected and warmed up, then follows commands read from stdin
// (which differ per mode), and answers "result <json>" or other lines. A
// worker exits when stdin closes (its parent died) or after MaxLife.
const WorkerEnv = "LOCKBENCH_WORKER"

// A WorkerSpec tells a worker process what to do.
type WorkerSpec struct {
	Mode       string // "contend", "waiter", "readers", "permits", "scale", "waiters"
	Lib        string
	Addr       string
	Key        string
	Workers    int           // goroutines (contend)
	WorkerBase int           // first worker number (contend)
	Hold       time.Duration // time in the critical section (contend, readers)
	Shared     bool          // the readers share the lock: they enter the guard with EnterShared (readers)
	Permits    int           // the semaphore's capacity (permits)
	GuardPath  string
	MaxLife    time.Duration
	Scale      ScaleConfig
}

// RunWorkerIfRequested runs the worker described by WorkerEnv and exits,
// or returns at once if the variable is not set.
func RunWorkerIfRequested() {
	raw := os.Getenv(WorkerEnv)
	if raw == "" {
		return
	}
	var spec WorkerSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "lockbench worker: bad spec:", err)
		os.Exit(2)
	}
	life := spec.MaxLife
	if life <= 0 {
		life = 2 * time.Minute
	}
	time.AfterFunc(life, func() {
		fmt.Fprintf(os.Stderr, "lockbench worker %s: exceeded its %v life, exiting\n", spec.Mode, life)
		os.Exit(3)
	})
	w := &worker{spec: spec, out: bufio.NewWriter(os.Stdout), in: make(chan string, 16)}
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			w.in <- sc.Text()
		}
		os.Exit(0) // the parent is gone, or closed stdin: stop
	}()
	if err := w.run(); err != nil {
		fmt.Fprintf(os.Stderr, "lockbench worker %s/%s: %v\n", spec.Mode, spec.Lib, err)
		os.Exit(1)
	}
	os.Exit(0)
}

type worker struct {
	spec WorkerSpec
	out  *bufio.Writer
	in   chan string
}

func (w *worker) say(format string, args ...any) {
	fmt.Fprintf(w.out, format+"\n", args...)
	w.out.Flush()
}

func (w *worker) sayResult(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.say("result %s", b)
	return nil
}

func (w *worker) run() error {
	switch w.spec.Mode {
	case "contend":
		return w.contend()
	case "waiter":
		return w.waiter()
	case "readers":
		return w.readers()
	case "permits":
		return w.permits()
	case "scale":
		res, err := runScale(w.spec.Addr, w.spec.Scale)
		if err != nil {
			return err
		}
		return w.sayResult(res)
	case "waiters":
		res, err := runWaiters(w.spec.Addr, w.spec.Scale)
		if err != nil {
			return err
		}
		return w.sayResult(res)
	}
	return fmt.Errorf("unknown mode %q", w.spec.Mode)
}

// warmUp makes one acquisition so that connections, scripts and server
// checks are in place before anything is timed.
func warmUp(lk Locker, key string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	unlock, err := lk.Lock(ctx, key)
	if err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	return unlock(ctx)
}

// open makes the worker's locker, warmed up, and opens the shared guard;
// done closes both.
func (w *worker) open(opts Options) (lk Locker, g *Guard, done func(), err error) {
	lk, err = NewLocker(w.spec.Lib, w.spec.Addr, opts)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := warmUp(lk, fmt.Sprintf("warm:%d", os.Getpid())); err != nil {
		lk.Close()
		return nil, nil, nil, err
	}
	g, err = OpenGuard(w.spec.GuardPath)
	if err != nil {
		lk.Close()
		return nil, nil, nil, err
	}
	return lk, g, func() {
		g.Close()
		lk.Close()
	}, nil
}

// contend: "ready"; then "go <start unix ns> <end unix ns>"; answers
// "result <ContendResult>".
func (w *worker) contend() error {
	lk, g, done, err := w.open(Options{})
	if err != nil {
		return err
	}
	defer done()
	w.say("ready")
	var start, end int64
	if _, err := fmt.Sscanf(<-w.in, "go %d %d", &start, &end); err != nil {
		return fmt.Errorf("bad go line: %w", err)
	}
	time.Sleep(time.Until(time.Unix(0, start)))
	res := Contend(lk, g, w.spec.Key, w.spec.Workers, w.spec.WorkerBase, w.spec.Hold, time.Unix(0, end))
	return w.sayResult(res)
}

// permits: "ready"; then "go <start unix ns> <end unix ns>"; answers
// "result <PermitsResult>".
func (w *worker) permits() error {
	lk, g, done, err := w.open(Options{Permits: w.spec.Permits})
	if err != nil {
		return err
	}
	defer done()
	w.say("ready")
	var start, end int64
	if _, err := fmt.Sscanf(<-w.in, "go %d %d", &start, &end); err != nil {
		return fmt.Errorf("bad go line: %w", err)
	}
	time.Sleep(time.Until(time.Unix(0, start)))
	res := ContendPermits(lk, g, w.spec.Key, w.spec.Workers, w.spec.Hold, w.spec.Permits, time.Unix(0, end))
	return w.sayResult(res)
}

// readers: "ready"; then "go" starts the readers (Read), "stop" stops
// them; answers "result <ReadersResult>".
func (w *worker) readers() error {
	lk, g, done, err := w.open(Options{})
	if err != nil {
		return err
	}
	defer done()
	w.say("ready")
	if line := <-w.in; line != "go" {
		return fmt.Errorf("expected go, got %q", line)
	}
	stop := make(chan struct{})
	out := make(chan ReadersResult, 1)
	go func() {
		out <- Read(lk, g, w.spec.Key, w.spec.Workers, w.spec.WorkerBase, w.spec.Hold, w.spec.Shared, stop)
	}()
	if line := <-w.in; line != "stop" {
		close(stop)
		<-out
		return fmt.Errorf("expected stop, got %q", line)
	}
	close(stop)
	return w.sayResult(<-out)
}

// waiter: "ready"; then for each "wait" (or "wait-traced") line it blocks
// in Lock, answers "acq <unix ns at acquisition> <read> <issue> <reply>"
// (the last three are traceHook timestamps, 0 when not traced) or
// "err <message>", releases and answers "rel"; "quit" ends it.
func (w *worker) waiter() error {
	var hook *traceHook
	opts := Options{}
	if traced(w.spec.Lib) {
		hook = &traceHook{}
		opts.Hook = hook
	}
	lk, g, done, err := w.open(opts)
	if err != nil {
		return err
	}
	defer done()
	w.say("ready")
	for cmd := range w.in {
		switch cmd {
		case "quit":
			return nil
		case "wait", "wait-traced":
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			var arm *time.Timer
			if hook != nil && cmd == "wait-traced" {
				// The first attempt and the subscription take well under
				// a millisecond; the holder releases 10 ms or more after
				// "wait". Armed in between, the first read is the release
				// notification and the first command the attempt it causes.
				arm = time.AfterFunc(3*time.Millisecond, hook.arm)
			}
			unlock, err := lk.Lock(ctx, w.spec.Key)
			t1 := time.Now().UnixNano()
			var tr [3]int64
			if arm != nil {
				arm.Stop()
				hook.disarm()
				tr = [3]int64{hook.read.Load(), hook.issue.Load(), hook.done.Load()}
			}
			if err != nil {
				cancel()
				w.say("err %s", strings.ReplaceAll(err.Error(), "\n", " "))
				continue
			}
			g.Enter(2)
			g.Exit()
			w.say("acq %d %d %d %d", t1, tr[0], tr[1], tr[2])
			err = unlock(ctx)
			cancel()
			if err != nil {
				w.say("err %s", strings.ReplaceAll(err.Error(), "\n", " "))
				continue
			}
			w.say("rel")
		default:
			return fmt.Errorf("unknown command %q", cmd)
		}
	}
	return nil
}

// A Proc is a worker process seen from its parent.
type Proc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	mode  string
}

// Reexec starts this binary again with the environment variable env set
// to spec as JSON (the child's main, or TestMain, looks for it first
// thing), its stderr this process's, and returns it with pipes to its
// stdin and from its stdout.
func Reexec(env string, spec any) (cmd *exec.Cmd, stdin io.WriteCloser, stdout io.ReadCloser, err error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, nil, err
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, nil, nil, err
	}
	cmd = exec.Command(exe)
	cmd.Env = append(os.Environ(), env+"="+string(b))
	cmd.Stderr = os.Stderr
	if stdin, err = cmd.StdinPipe(); err != nil {
		return nil, nil, nil, err
	}
	if stdout, err = cmd.StdoutPipe(); err != nil {
		return nil, nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, nil, err
	}
	return cmd, stdin, stdout, nil
}

// StartWorker re-executes this binary as a worker and waits for its
// "ready" line.
func StartWorker(spec WorkerSpec) (*Proc, error) {
	cmd, stdin, stdout, err := Reexec(WorkerEnv, spec)
	if err != nil {
		return nil, err
	}
	p := &Proc{cmd: cmd, stdin: stdin, lines: make(chan string, 64), mode: spec.Mode}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<16), 1<<24)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	if spec.Mode == "contend" || spec.Mode == "waiter" || spec.Mode == "readers" || spec.Mode == "permits" {
		line, err := p.Read(30 * time.Second)
		if err != nil {
			p.Kill()
			return nil, err
		}
		if line != "ready" {
			p.Kill()
			return nil, fmt.Errorf("worker %s: expected ready, got %q", spec.Mode, line)
		}
	}
	return p, nil
}

// Send writes one command line.
func (p *Proc) Send(line string) error {
	_, err := io.WriteString(p.stdin, line+"\n")
	return err
}

// Read returns the next line, waiting at most timeout.
func (p *Proc) Read(timeout time.Duration) (string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case line, ok := <-p.lines:
		if !ok {
			return "", fmt.Errorf("worker %s exited", p.mode)
		}
		return line, nil
	case <-t.C:
		return "", fmt.Errorf("worker %s: no answer within %v", p.mode, timeout)
	}
}

// Result reads a "result <json>" line into v.
func (p *Proc) Result(timeout time.Duration, v any) error {
	line, err := p.Read(timeout)
	if err != nil {
		return err
	}
	js, ok := strings.CutPrefix(line, "result ")
	if !ok {
		return fmt.Errorf("worker %s: expected a result, got %q", p.mode, line)
	}
	return json.Unmarshal([]byte(js), v)
}

// Wait closes stdin and waits for the process to exit, killing it after
// timeout.
func (p *Proc) Wait(timeout time.Duration) error {
	p.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(timeout):
		p.Kill()
		return errors.New("worker killed after timeout")
	}
}

// Kill ends the process (this worker only, by its pid).
func (p *Proc) Kill() {
	if p.cmd.Process != nil {
		_ = p.cmd.Process.Kill()
	}
	p.stdin.Close()
	go func() { _ = p.cmd.Wait() }()
}
