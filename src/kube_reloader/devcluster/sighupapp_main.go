// The signal strategy's test application (devcluster/nodebuild.py builds it, static): it reads
// the file named by CONFIG_FILE at start and again on each SIGHUP, counts the SIGHUPs, and
// serves on LISTEN (default 127.0.0.1:8080) a JSON document of what it has loaded:
// {"config": ..., "sighups": N, "pid": P}. SIGTERM stops it after in-flight requests end.
package main

import (
	"context"
	"encoding/json"
	"log"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

type state struct {
	mu      sync.Mutex
	path    string
	config  string
	sighups int
}

func (s *state) load() {
	data, err := os.ReadFile(s.path)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		log.Printf("reading %s: %v (keeping what was loaded)", s.path, err)
		return
	}
	s.config = string(data)
}

func main() {
	listen := os.Getenv("LISTEN")
	if listen == "" {
		listen = "127.0.0.1:8080"
	}
	st := &state{path: os.Getenv("CONFIG_FILE")}
	st.load()
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		st.mu.Lock()
		doc := map[string]any{"config": st.config, "sighups": st.sighups, "pid": os.Getpid()}
		st.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(doc)
	})
	srv := &http.Server{Addr: listen, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		for s := range sigs {
			if s == syscall.SIGHUP {
				st.load()
				st.mu.Lock()
				st.sighups++
				n := st.sighups
				st.mu.Unlock()
				log.Printf("SIGHUP %d: config reloaded", n)
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = srv.Shutdown(ctx)
			cancel()
			return
		}
	}()
	log.Printf("serving on %s", listen)
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		log.Fatal(err)
	}
}
