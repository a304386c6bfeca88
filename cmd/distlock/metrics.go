package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/distlock/distlock"
	distlockprom "github.com/distlock/distlock/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metricsPath is where run --metrics-addr serves the metrics.
const metricsPath = "/metrics"

// metricsShutdown bounds the end of the scrapes in progress when run
// ends.
const metricsShutdown = time.Second

// A metricsServer serves, at http://ADDR/metrics, the metrics of the
// library (the distlock Collector), of the Go runtime and of the
// process, in the Prometheus format, from a registry of its own.
type metricsServer struct {
	col *distlockprom.Collector
	srv *http.Server
	url string // http://HOST:PORT/metrics, with the port bound
}

// serveMetrics binds addr (--metrics-addr) and serves the metrics there
// until close. A port that cannot be bound is a usage error (64), before
// the lock is taken.
func serveMetrics(addr string) (*metricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Err != nil {
			err = op.Err // "address already in use", not "listen tcp ADDR: ..."
		}
		return nil, usageErrorf("cannot serve metrics on --metrics-addr %s: %v", addr, err)
	}
	m := &metricsServer{col: distlockprom.New(), url: "http://" + ln.Addr().String() + metricsPath}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.col, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle(metricsPath, promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = m.srv.Serve(ln) }()
	return m, nil
}

// option installs the metrics' Collector on a Client.
func (m *metricsServer) option() distlock.Option { return distlock.WithObserver(m.col) }

// close stops the server, giving the scrapes in progress a moment.
func (m *metricsServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), metricsShutdown)
	defer cancel()
	if m.srv.Shutdown(ctx) != nil {
		_ = m.srv.Close()
	}
}

// startMetrics starts serving metrics if run has --metrics-addr, and
// returns the options that install their Collector on the Client (none
// without it) and the function that stops the server (which does
// nothing without it). With --verbose it says where it serves them, the
// port that ":0" picked included.
func startMetrics(o *runOptions) ([]distlock.Option, func(), error) {
	if o.metricsAddr == "" {
		return nil, func() {}, nil
	}
	m, err := serveMetrics(o.metricsAddr)
	if err != nil {
		return nil, nil, err
	}
	if o.verbose {
		fmt.Fprintf(os.Stderr, "distlock run: serving metrics on %s\n", m.url)
	}
	return []distlock.Option{m.option()}, m.close, nil
}
