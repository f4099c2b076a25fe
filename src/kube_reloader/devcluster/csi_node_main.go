// kr-csi-node: the two node-side pieces the Secrets Store CSI driver needs beside it on the dev
// cluster's real node, built by devcluster/csi.py in the driver's own module:
//
//   - a plugin registration server in the kubelet's plugins_registry directory, so the kubelet
//     learns the driver's CSI endpoint (what node-driver-registrar does in a cluster; that
//     module is not served by the Go module proxy here);
//   - a provider ("kube-reloader-files") on the driver's provider socket: a Mount returns the
//     files named by the SecretProviderClass parameter `objects` (comma-separated) from
//     <root>/<pod namespace>/, each with the first 16 hex digits of its SHA-256 as its version,
//     so a test rotates a secret by writing a file and the driver's rotation sees a new version.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"sigs.k8s.io/secrets-store-csi-driver/provider/v1alpha1"
)

const namespaceAttribute = "csi.storage.k8s.io/pod.namespace"

type registration struct {
	driver   string
	endpoint string
}

func (r registration) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              r.driver,
		Endpoint:          r.endpoint,
		SupportedVersions: []string{"1.0.0"},
	}, nil
}

func (r registration) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if s.PluginRegistered {
		log.Printf("kubelet registered %s at %s", r.driver, r.endpoint)
	} else {
		log.Printf("kubelet refused %s: %s", r.driver, s.Error)
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

type files struct {
	v1alpha1.UnimplementedCSIDriverProviderServer
	root string
}

func (files) Version(context.Context, *v1alpha1.VersionRequest) (*v1alpha1.VersionResponse, error) {
	return &v1alpha1.VersionResponse{Version: "v1alpha1", RuntimeName: "kube-reloader-files", RuntimeVersion: "1"}, nil
}

// plain reports whether name is one path element of a file (no separator, not . or ..).
func plain(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, `/\`)
}

func (f files) Mount(_ context.Context, req *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
	var attributes map[string]string
	if err := json.Unmarshal([]byte(req.GetAttributes()), &attributes); err != nil {
		return nil, fmt.Errorf("attributes: %w", err)
	}
	var mode os.FileMode
	if err := json.Unmarshal([]byte(req.GetPermission()), &mode); err != nil {
		return nil, fmt.Errorf("permission: %w", err)
	}
	namespace := attributes[namespaceAttribute]
	if !plain(namespace) {
		return nil, fmt.Errorf("no pod namespace in the attributes")
	}
	resp := &v1alpha1.MountResponse{}
	for _, name := range strings.Split(attributes["objects"], ",") {
		name = strings.TrimSpace(name)
		if !plain(name) {
			return nil, fmt.Errorf("object %q is not a file name", name)
		}
		data, err := os.ReadFile(filepath.Join(f.root, namespace, name))
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(data)
		resp.Files = append(resp.Files, &v1alpha1.File{Path: name, Mode: int32(mode), Contents: data})
		resp.ObjectVersion = append(resp.ObjectVersion, &v1alpha1.ObjectVersion{Id: name, Version: hex.EncodeToString(sum[:8])})
	}
	return resp, nil
}

// serve listens on a fresh unix socket at path and serves register's services on it.
func serve(path string, register func(*grpc.Server)) *grpc.Server {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		log.Fatal(err)
	}
	_ = os.Remove(path)
	listener, err := net.Listen("unix", path)
	if err != nil {
		log.Fatal(err)
	}
	server := grpc.NewServer()
	register(server)
	go func() {
		if err := server.Serve(listener); err != nil {
			log.Fatal(err)
		}
	}()
	log.Printf("serving on %s", path)
	return server
}

func main() {
	driver := flag.String("driver", "secrets-store.csi.k8s.io", "the CSI driver's name")
	endpoint := flag.String("driver-endpoint", "", "the driver's CSI socket path, as the kubelet dials it")
	registry := flag.String("registration-socket", "", "the registration socket, in the kubelet's plugins_registry")
	provider := flag.String("provider-socket", "", "the provider socket, in the driver's provider volume")
	root := flag.String("files", "", "the directory of <namespace>/<file> the provider serves")
	flag.Parse()
	if *endpoint == "" || *registry == "" || *provider == "" || *root == "" {
		log.Fatal("--driver-endpoint, --registration-socket, --provider-socket and --files are required")
	}
	servers := []*grpc.Server{
		serve(*provider, func(s *grpc.Server) { v1alpha1.RegisterCSIDriverProviderServer(s, files{root: *root}) }),
		serve(*registry, func(s *grpc.Server) {
			registerapi.RegisterRegistrationServer(s, registration{driver: *driver, endpoint: *endpoint})
		}),
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
	for _, s := range servers {
		s.Stop()
	}
	_ = os.Remove(*registry)
	_ = os.Remove(*provider)
}
