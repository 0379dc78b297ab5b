package daemon

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cardboxhq/cardbox/api"
	"github.com/cardboxhq/cardbox/api/adminhttp"
	"github.com/cardboxhq/cardbox/api/cardboxhttp"
	"github.com/cardboxhq/cardbox/api/cxdbhttp"
	"github.com/cardboxhq/cardbox/cxdbcompat/server"
	"github.com/cardboxhq/cardbox/internal/connlimit"
)

// buildServers makes the binary server and the HTTP API over the
// services, with TLS on their listeners when configured.
func (d *Daemon) buildServers() {
	cfg := &d.cfg
	d.bin = server.New(server.Options{
		Store: d.cxdb, Live: d.cxdb.Hub(), Logger: d.log, IdleTimeout: cfg.IdleTimeout, WriteTimeout: cfg.WriteTimeout,
		Authenticate: d.access.binary(), Limit: d.access.limit(), MaxSessionsPerTenant: cfg.TenantMaxConns,
		TenantShare: d.access.memoryShare(cfg),
	})
	httpMetrics := api.NewHTTPMetrics()
	listeners := connlimit.NewCollector(map[string]*connlimit.Listener{"binary": d.binLn, "http": d.httpLn})
	d.compactions = newCompactions(d.engine, d.log,
		compactionPolicy{threshold: cfg.CompactionThreshold, eraseWithin: cfg.EraseWithin}, cfg.Test.Now, d.life, d.goWork)
	collectors := []prometheus.Collector{httpMetrics, listeners, d.bin.Collector(), d.compactions}
	if d.proj != nil {
		collectors = append(collectors, d.proj)
	}
	if d.db.Collector != nil {
		collectors = append(collectors, d.db.Collector) // the embedded cluster's restarts and free space
	}
	metrics := api.NewRegistry(d.engine, collectors...)
	// Large HTTP answers share the binary port's answer budget.
	answers := d.bin.ReplyBudget()
	if cfg.Test.Answers != nil {
		answers = cfg.Test.Answers
	}
	routes := []api.Routes{
		cardboxhttp.NewWith(d.cards, cardboxhttp.Options{Answers: answers, AnswerWait: cfg.Test.AnswerWait}),
		cardboxhttp.Assembly(d.cards, d.pages),
		cxdbhttp.New(d.cxdb, cxdbhttp.Options{
			Stop: d.life.Done(), Stats: d.engine, DataDir: cfg.DataDir, Gatherer: metrics, Answers: answers,
			Heartbeat: cfg.Test.Heartbeat, AnswerWait: cfg.Test.AnswerWait, Pages: d.pages,
		}),
		adminhttp.NewCompactions(d.compactions),
	}
	if d.access.tenants != nil {
		routes = append(routes, adminhttp.New(d.access.tenants).WithUsage(d.access.usage(d.engine)))
	}
	deadlines := api.DefaultDeadlines
	deadlines.Write = cfg.WriteTimeout
	d.handler = api.New(api.Options{
		Health: d.engine, Routes: routes, BodyLimit: cfg.HTTPBodyLimit,
		Metrics: metrics, HTTPMetrics: httpMetrics,
		AccessLog: cfg.AccessLog, Deadlines: deadlines, Pprof: cfg.Pprof, Logger: d.log, Auth: d.access.http(), Limit: d.access.limit(),
	})
	d.web = &http.Server{
		Handler:           d.handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       cfg.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(d.log.Handler(), slog.LevelDebug),
	}
	d.binServe, d.webServe = d.binLn, d.httpLn
	if d.tlsCfg != nil {
		binTLS, webTLS := secure(d.binLn, d.httpLn, d.tlsCfg, cfg, d.log)
		d.onClose(func() { binTLS.Close() })
		d.onClose(func() { webTLS.Close() })
		d.binServe, d.webServe = binTLS, webTLS
	}
}

// listen opens both listeners with the connection limit; a connection
// over it is refused with a message in the listener's protocol, or, with
// TLS, closed without one: a plaintext message would not reach a TLS
// client, and answering in TLS would take a handshake just when the
// server is busiest.
func listen(cfg *Config, withTLS bool) (binLn, httpLn *connlimit.Listener, err error) {
	b, err := net.Listen("tcp", cfg.BinaryAddr)
	if err != nil {
		return nil, nil, fmt.Errorf("binary listener: %w", err)
	}
	h, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		b.Close()
		return nil, nil, fmt.Errorf("http listener: %w", err)
	}
	binRefuse, httpRefuse := server.RefuseConn, api.RefuseConn
	if withTLS {
		binRefuse, httpRefuse = nil, nil
	}
	binLn = connlimit.New(b, connlimit.Options{Max: cfg.MaxConns, Refuse: binRefuse})
	httpLn = connlimit.New(h, connlimit.Options{Max: cfg.MaxConns, Refuse: httpRefuse})
	return binLn, httpLn, nil
}
