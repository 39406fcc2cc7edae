package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// ReadyFunc reports whether the daemon is ready; a non-nil error says why not.
type ReadyFunc func() error

// Server is a daemon's HTTP endpoint for health, readiness and metrics.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	mu   sync.Mutex
	done chan struct{}
	err  error
}

// Listen starts serving /healthz, /readyz and /metrics on addr ("127.0.0.1:0"
// picks a free port; Addr tells which). extra handlers may be mounted by path.
func Listen(addr string, ready ReadyFunc, metrics *Metrics, extra map[string]http.Handler) (*Server, error) {
	return ListenGuarded(addr, ready, metrics, extra, nil)
}

// Guard decides whether a request may be served: 0 and nil serve it; otherwise
// the HTTP status and the error are the answer. A tier daemon's guard checks
// ACL tokens.
type Guard func(r *http.Request) (int, error)

// ListenGuarded is Listen with every request passed through guard first (nil:
// none).
func ListenGuarded(addr string, ready ReadyFunc, metrics *Metrics, extra map[string]http.Handler, guard Guard) (*Server, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if ready != nil {
			if err := ready(); err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprintf(w, "not ready: %v\n", err)
				return
			}
		}
		fmt.Fprintln(w, "ready")
	})
	if metrics != nil {
		mux.Handle("/metrics", metrics.Handler())
	}
	for path, h := range extra {
		mux.Handle(path, h)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("http listen %s: %w", addr, err)
	}
	var h http.Handler = mux
	if guard != nil {
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if code, err := guard(r); err != nil {
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
				w.WriteHeader(code)
				fmt.Fprintln(w, err)
				return
			}
			mux.ServeHTTP(w, r)
		})
	}
	s := &Server{srv: &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}, ln: ln, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		err := s.srv.Serve(ln)
		if !errors.Is(err, http.ErrServerClosed) {
			s.mu.Lock()
			s.err = err
			s.mu.Unlock()
		}
	}()
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Shutdown stops the server gracefully within ctx.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		err = s.err
	}
	return err
}
