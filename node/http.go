package node

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// HTTPOptions configure the HTTP server (docs/security.md, "HTTP
// endpoints").
type HTTPOptions struct {
	// TLS serves HTTPS with the node's certificate (reloaded with it), TLS
	// 1.3; needs Security.TLS. Clients need no certificate: a scraper
	// checks the node against the cluster CA. Without it the server is
	// plaintext: bind it to a private address.
	TLS bool
	// Pprof serves Go's profiles under /debug/pprof/. Off by default:
	// profiles reveal memory contents and cost CPU to take.
	Pprof bool
}

// httpHandler serves:
//
//	/healthz        200 "ok" while serving with a healthy engine, else 503
//	                and the reason
//	/metrics        Prometheus metrics (metrics.go)
//	/debug/pprof/   Go profiles, with HTTPOptions.Pprof only (else 404)
//	/debug/faults/  in test builds only, a slow disk (faults_on.go); 404
//	                in every other build (faults_off.go)
func (n *Node) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", n.serveHealthz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(n.metrics.registry, promhttp.HandlerOpts{
		ErrorLog: nil, EnableOpenMetrics: true,
	}))
	if n.cfg.HTTP.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	n.registerFaultHandlers(mux)
	return mux
}

func (n *Node) serveHealthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if !n.serving.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "not serving: starting or stopping")
		return
	}
	st, err := n.db.Stats()
	if err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "engine: %v\n", err)
		return
	}
	if st.BackgroundError != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "engine has stopped writes: %v\n", st.BackgroundError)
		return
	}
	fmt.Fprintln(w, "ok")
}

// httpListener wraps the HTTP listener in TLS when HTTPOptions.TLS asks.
func (n *Node) httpListener(l net.Listener) net.Listener {
	if !n.cfg.HTTP.TLS || n.sec.tls == nil {
		return l
	}
	return tls.NewListener(l, n.sec.tls.httpServerConfig())
}
