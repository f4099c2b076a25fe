// The webhook server of the TLS scenarios (devcluster/nodebuild.py builds it, static): an
// HTTPS validating admission webhook that, like many real ones, reads its certificate once at
// start (CERT_FILE, KEY_FILE) and never again. It allows every AdmissionReview it is sent
// (POST /validate) and answers GET /healthz while it is not stopping; the served
// certificate's serial is in GET /serial. On SIGTERM it first fails /healthz for DRAIN seconds
// (default 3) so that its endpoint is taken out of rotation, then stops after in-flight
// requests end. Keep-alives are off: each request is a connection of its own.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

type review struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Request    *struct {
		UID string `json:"uid"`
	} `json:"request"`
}

func main() {
	listen := envOr("LISTEN", "0.0.0.0:8443")
	pair, err := tls.LoadX509KeyPair(envOr("CERT_FILE", "/tls/tls.crt"), envOr("KEY_FILE", "/tls/tls.key"))
	if err != nil {
		log.Fatalf("loading the certificate: %v", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		log.Fatalf("parsing the certificate: %v", err)
	}
	serial := leaf.SerialNumber.Text(16)
	log.Printf("serving certificate serial %s, valid until %s", serial, leaf.NotAfter.UTC().Format(time.RFC3339))
	drain, err := strconv.Atoi(envOr("DRAIN", "3"))
	if err != nil || drain < 0 {
		drain = 3
	}
	var stopping atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if stopping.Load() {
			http.Error(w, "stopping", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	mux.HandleFunc("/serial", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(serial))
	})
	mux.HandleFunc("/validate", func(w http.ResponseWriter, r *http.Request) {
		var in review
		if r.Method != http.MethodPost || json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&in) != nil || in.Request == nil {
			http.Error(w, "an AdmissionReview is expected", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
			"response": map[string]any{"uid": in.Request.UID, "allowed": true},
		})
	})
	srv := &http.Server{
		Addr:              listen,
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12},
	}
	srv.SetKeepAlivesEnabled(false)
	done := make(chan struct{})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT) // before serving: a stop always drains
	go func() {
		<-sig
		stopping.Store(true)
		log.Printf("stopping: draining for %d s", drain)
		time.Sleep(time.Duration(drain) * time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		close(done)
	}()
	if err := srv.ListenAndServeTLS("", ""); err != nil && err != http.ErrServerClosed {
		log.Fatal(err)
	}
	<-done
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
