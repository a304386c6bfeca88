package otel_test

import (
	"context"
	"fmt"
	"log"

	"github.com/distlock/distlock"
	distlockotel "github.com/distlock/distlock/otel"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// exampleRedis starts a throwaway redis-server for the example; in your
// code, rdb is your own go-redis client.
func exampleRedis() (*redis.Client, func()) {
	srv, err := redistest.NewServer()
	if err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewClient(srv.Options())
	return rdb, func() { rdb.Close(); srv.Stop() }
}

// Wire the Observer into a Client. The providers here keep what they get
// in memory; yours export it (an OTLP exporter, say). Without options, New
// uses the global providers that otel.SetTracerProvider and
// otel.SetMeterProvider set.
func Example() {
	rdb, done := exampleRedis()
	defer done()
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer tp.Shutdown(context.Background())
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(context.Background())

	obs := distlockotel.New(distlockotel.WithTracerProvider(tp), distlockotel.WithMeterProvider(mp))
	locks := distlock.New(redisstore.New(rdb), distlock.WithObserver(obs))
	defer locks.Close()

	ctx, request := tp.Tracer("app").Start(context.Background(), "request")
	lease, err := locks.Mutex("nightly-report").Lock(ctx) // a span distlock.lock, child of request
	if err != nil {
		log.Fatal(err)
	}
	// ... work under lease.Context() ...
	lease.Unlock(ctx) // ends the span distlock.lease, child of distlock.lock
	request.End()

	names := map[[8]byte]string{}
	for _, s := range spans.GetSpans() {
		names[s.SpanContext.SpanID()] = s.Name
	}
	for _, s := range spans.GetSpans() {
		if parent, ok := names[s.Parent.SpanID()]; ok {
			fmt.Println(s.Name, "in", parent)
		}
	}
	// Output:
	// distlock.lock in request
	// distlock.lease in distlock.lock
	// distlock.unlock in request
}
