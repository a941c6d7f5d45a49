package otelobserve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// DefaultMetricInterval is how often Setup pushes metrics over OTLP.
const DefaultMetricInterval = 30 * time.Second

// Setup builds trace and meter providers from cfg.OTLPEndpoint and
// cfg.Prometheus and returns an Observer on them, the Prometheus /metrics
// handler (nil unless cfg.Prometheus) and a shutdown function that flushes
// and stops the exporters. With neither setting the Observer records
// nothing (no-op providers).
//
// The providers are not installed globally; the caller may do so.
func Setup(ctx context.Context, cfg Config) (*Observer, http.Handler, func(context.Context) error, error) {
	if cfg.ServiceName == "" {
		cfg.ServiceName = "cursorflow"
	}
	if cfg.MetricInterval <= 0 {
		cfg.MetricInterval = DefaultMetricInterval
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attribute.String("service.name", cfg.ServiceName)))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("otelobserve: resource: %w", err)
	}
	var shutdowns []func(context.Context) error
	shutdown := func(ctx context.Context) error {
		var errs []error
		for i := len(shutdowns) - 1; i >= 0; i-- {
			errs = append(errs, shutdowns[i](ctx))
		}
		return errors.Join(errs...)
	}
	fail := func(err error) (*Observer, http.Handler, func(context.Context) error, error) {
		_ = shutdown(ctx)
		return nil, nil, nil, err
	}

	var readers []sdkmetric.Option
	cfg.TracerProvider = tracenoop.NewTracerProvider()
	if cfg.OTLPEndpoint != "" {
		tracesURL, metricsURL, err := otlpURLs(cfg.OTLPEndpoint)
		if err != nil {
			return fail(err)
		}
		texp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(tracesURL))
		if err != nil {
			return fail(fmt.Errorf("otelobserve: OTLP trace exporter: %w", err))
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(texp), sdktrace.WithResource(res))
		shutdowns = append(shutdowns, tp.Shutdown)
		cfg.TracerProvider = tp
		mexp, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(metricsURL))
		if err != nil {
			return fail(fmt.Errorf("otelobserve: OTLP metric exporter: %w", err))
		}
		readers = append(readers, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(mexp, sdkmetric.WithInterval(cfg.MetricInterval))))
	}
	var handler http.Handler
	if cfg.Prometheus {
		reg := prometheus.NewRegistry()
		// Process and runtime metrics come with the handler; a failure
		// to register them only loses those.
		_ = reg.Register(collectors.NewGoCollector())
		_ = reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		pexp, err := otelprom.New(otelprom.WithRegisterer(reg))
		if err != nil {
			return fail(fmt.Errorf("otelobserve: prometheus exporter: %w", err))
		}
		readers = append(readers, sdkmetric.WithReader(pexp))
		handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	}
	cfg.MeterProvider = metricnoop.NewMeterProvider()
	if len(readers) > 0 {
		mp := sdkmetric.NewMeterProvider(append(readers, sdkmetric.WithResource(res))...)
		shutdowns = append(shutdowns, mp.Shutdown)
		cfg.MeterProvider = mp
	}
	return New(cfg), handler, shutdown, nil
}

// otlpURLs derives the signal URLs from a collector's base URL; a URL that
// already names /v1/traces or /v1/metrics is used for both signals' base.
func otlpURLs(endpoint string) (traces, metrics string, err error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", "", fmt.Errorf("otelobserve: OTLPEndpoint %q: want http(s)://host:port", endpoint)
	}
	base := strings.TrimSuffix(u.Path, "/")
	base = strings.TrimSuffix(strings.TrimSuffix(base, "/v1/traces"), "/v1/metrics")
	t, m := *u, *u
	t.Path, m.Path = base+"/v1/traces", base+"/v1/metrics"
	return t.String(), m.String(), nil
}
