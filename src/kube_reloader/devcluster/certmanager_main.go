// The cert-manager controller for kube-reloader's dev cluster.
//
// Upstream builds this binary from its nested module cmd/controller
// (github.com/cert-manager/cert-manager/controller-binary), which the Go module proxy does not
// serve. This is that command's Run (cmd/controller/app/controller.go of the same release,
// Apache-2.0, The cert-manager Authors) cut to the dev cluster's needs: the same controller
// set, context factory and defaults from the served module, flags from pflag instead of cobra,
// no leader election, no pprof, metrics served plain on the address given.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	config "github.com/cert-manager/cert-manager/internal/apis/config/controller"
	configscheme "github.com/cert-manager/cert-manager/internal/apis/config/controller/scheme"
	defaults "github.com/cert-manager/cert-manager/internal/apis/config/controller/v1alpha1"
	"github.com/cert-manager/cert-manager/internal/apis/config/controller/validation"
	cmdutil "github.com/cert-manager/cert-manager/internal/cmd/util"
	"github.com/cert-manager/cert-manager/internal/pem"
	configv1alpha1 "github.com/cert-manager/cert-manager/pkg/apis/config/controller/v1alpha1"
	"github.com/cert-manager/cert-manager/pkg/controller"
	"github.com/cert-manager/cert-manager/pkg/healthz"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"

	_ "github.com/cert-manager/cert-manager/pkg/controller/acmechallenges"
	_ "github.com/cert-manager/cert-manager/pkg/controller/acmeorders"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificate-shim/ingresses"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/acme"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/vault"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/venafi"
)

func main() {
	ctx, exit := cmdutil.SetupExitHandler(context.Background(), cmdutil.GracefulShutdown)
	defer exit() // this may call os.Exit, so it is deferred first
	logf.InitLogs()
	defer logf.FlushLogs()
	ctx = logf.NewContext(ctx, logf.Log, "controller")
	if err := run(ctx, os.Args[1:]); err != nil && !errors.Is(err, pflag.ErrHelp) {
		logf.Log.Error(err, "error executing command")
		cmdutil.SetExitCode(err)
	}
}

func configure(args []string) (*config.ControllerConfiguration, error) {
	scheme, _, err := configscheme.NewSchemeAndCodecs()
	if err != nil {
		return nil, err
	}
	versioned := &configv1alpha1.ControllerConfiguration{}
	scheme.Default(versioned)
	c := &config.ControllerConfiguration{}
	if err := scheme.Convert(versioned, c, nil); err != nil {
		return nil, err
	}
	fs := pflag.NewFlagSet("controller", pflag.ContinueOnError)
	fs.StringVar(&c.KubeConfig, "kubeconfig", c.KubeConfig, "path to a kubeconfig")
	fs.StringVar(&c.Namespace, "namespace", c.Namespace, "watch only this namespace")
	fs.StringVar(&c.ClusterResourceNamespace, "cluster-resource-namespace", c.ClusterResourceNamespace,
		"namespace of the Secrets ClusterIssuers refer to")
	fs.StringSliceVar(&c.Controllers, "controllers", c.Controllers, "controllers to enable ('*', 'foo', '-foo')")
	fs.StringVar(&c.MetricsListenAddress, "metrics-listen-address", "127.0.0.1:0", "metrics listen address")
	fs.StringVar(&c.HealthzListenAddress, "healthz-listen-address", "127.0.0.1:0", "healthz listen address")
	fs.IntVar(&c.NumberOfConcurrentWorkers, "concurrent-workers", c.NumberOfConcurrentWorkers, "workers per controller")
	fs.DurationVar(&c.CertificateRequestMinimumBackoffDuration, "certificate-request-minimum-backoff-duration",
		c.CertificateRequestMinimumBackoffDuration, "first wait before re-issuing after a failed issuance")
	fs.DurationVar(&c.CertificateRequestMaximumBackoffDuration, "certificate-request-maximum-backoff-duration",
		c.CertificateRequestMaximumBackoffDuration, "longest wait before re-issuing after failed issuances")
	leaderElect := fs.Bool("leader-elect", false, "not supported by this build; must be false")
	logf.AddFlags(&c.Logging, fs)
	fs.AddGoFlagSet(flag.CommandLine)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if *leaderElect {
		return nil, errors.New("--leader-elect=true is not supported by this build")
	}
	c.LeaderElectionConfig.Enabled = false
	if errs := validation.ValidateControllerConfiguration(c, nil); len(errs) > 0 {
		return nil, fmt.Errorf("error validating flags: %w", errs.ToAggregate())
	}
	if err := logf.ValidateAndApply(&c.Logging); err != nil {
		return nil, err
	}
	return c, nil
}

func enabledControllers(c *config.ControllerConfiguration) sets.Set[string] {
	var disabled []string
	enabled := sets.New[string]()
	for _, name := range c.Controllers {
		switch {
		case name == "*":
			enabled.Insert(defaults.DefaultEnabledControllers...)
		case strings.HasPrefix(name, "-"):
			disabled = append(disabled, strings.TrimPrefix(name, "-"))
		default:
			enabled.Insert(name)
		}
	}
	if len(disabled) > 0 && enabled.Len() == 0 {
		enabled.Insert(defaults.DefaultEnabledControllers...)
	}
	if c.Namespace != "" {
		enabled.Delete(defaults.ClusterScopedControllers...)
	}
	return enabled.Delete(disabled...)
}

func quantities(c *config.ControllerConfiguration) ([4]resource.Quantity, error) {
	var out [4]resource.Quantity
	h := c.ACMEHTTP01Config
	for i, s := range []string{h.SolverResourceRequestCPU, h.SolverResourceRequestMemory,
		h.SolverResourceLimitsCPU, h.SolverResourceLimitsMemory} {
		q, err := resource.ParseQuantity(s)
		if err != nil {
			return out, fmt.Errorf("error parsing ACME HTTP01 solver resources %q: %w", s, err)
		}
		out[i] = q
	}
	return out, nil
}

func run(rootCtx context.Context, args []string) error {
	opts, err := configure(args)
	if err != nil {
		return err
	}
	rootCtx, cancel := context.WithCancel(rootCtx)
	defer cancel()
	log := logf.FromContext(rootCtx)
	g, rootCtx := errgroup.WithContext(rootCtx)

	q, err := quantities(opts)
	if err != nil {
		return err
	}
	factory, err := controller.NewContextFactory(rootCtx, controller.ContextOptions{
		Kubeconfig:         opts.KubeConfig,
		KubernetesAPIQPS:   opts.KubernetesAPIQPS,
		KubernetesAPIBurst: opts.KubernetesAPIBurst,
		APIServerHost:      opts.APIServerHost,
		Namespace:          opts.Namespace,
		ACMEOptions: controller.ACMEOptions{
			HTTP01SolverResourceRequestCPU:    q[0],
			HTTP01SolverResourceRequestMemory: q[1],
			HTTP01SolverResourceLimitsCPU:     q[2],
			HTTP01SolverResourceLimitsMemory:  q[3],
			ACMEHTTP01SolverRunAsNonRoot:      opts.ACMEHTTP01Config.SolverRunAsNonRoot,
			HTTP01SolverImage:                 opts.ACMEHTTP01Config.SolverImage,
			DNS01CheckRetryPeriod:             opts.ACMEDNS01Config.CheckRetryPeriod,
			DNS01CheckAuthoritative:           !opts.ACMEDNS01Config.RecursiveNameserversOnly,
		},
		SchedulerOptions: controller.SchedulerOptions{MaxConcurrentChallenges: opts.MaxConcurrentChallenges},
		IssuerOptions: controller.IssuerOptions{
			ClusterResourceNamespace: opts.ClusterResourceNamespace,
		},
		IngressShimOptions: controller.IngressShimOptions{
			DefaultAutoCertificateAnnotations: opts.IngressShimConfig.DefaultAutoCertificateAnnotations,
		},
		CertificateOptions: controller.CertificateOptions{
			EnableOwnerRef:                           opts.EnableCertificateOwnerRef,
			CopiedAnnotationPrefixes:                 opts.CopiedAnnotationPrefixes,
			CertificateRequestMinimumBackoffDuration: opts.CertificateRequestMinimumBackoffDuration,
			CertificateRequestMaximumBackoffDuration: opts.CertificateRequestMaximumBackoffDuration,
		},
	})
	if err != nil {
		return err
	}
	ctx, err := factory.Build()
	if err != nil {
		return err
	}
	p := opts.PEMSizeLimitsConfig
	pem.SetGlobalSizeLimits(pem.NewSizeLimitsFromConfig(
		p.MaxCertificateSize, p.MaxPrivateKeySize, p.MaxChainLength, p.MaxBundleSize))

	enabled := enabledControllers(opts)
	log.Info(fmt.Sprintf("enabled controllers: %s", sets.List(enabled)))

	lc := net.ListenConfig{}
	metricsLn, err := lc.Listen(rootCtx, "tcp", opts.MetricsListenAddress)
	if err != nil {
		return fmt.Errorf("failed to listen on metrics address %s: %v", opts.MetricsListenAddress, err)
	}
	ctx.Metrics.SetupCertificateCollector(ctx.SharedInformerFactory.Certmanager().V1().Certificates().Lister())
	metrics := ctx.Metrics.NewServer(metricsLn)
	g.Go(func() error {
		<-rootCtx.Done()
		shutdown, done := context.WithTimeout(context.Background(), 5*time.Second)
		defer done()
		return metrics.Shutdown(shutdown) //nolint:contextcheck
	})
	g.Go(func() error {
		log.Info("starting metrics server", "address", metricsLn.Addr())
		if err := metrics.Serve(metricsLn); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	healthzLn, err := lc.Listen(rootCtx, "tcp", opts.HealthzListenAddress)
	if err != nil {
		return fmt.Errorf("failed to listen on healthz address %s: %v", opts.HealthzListenAddress, err)
	}
	health := healthz.NewServer(opts.LeaderElectionConfig.HealthzTimeout)
	g.Go(func() error {
		log.Info("starting healthz server", "address", healthzLn.Addr())
		return health.Start(rootCtx, healthzLn)
	})

	for name, construct := range controller.Known() {
		if !enabled.Has(name) {
			continue
		}
		iface, err := construct(factory)
		if err != nil {
			cancel()
			_ = g.Wait()
			return fmt.Errorf("error starting controller %s: %v", name, err)
		}
		log.Info("starting controller", "controller", name)
		g.Go(func() error { return iface.Run(opts.NumberOfConcurrentWorkers, rootCtx) })
	}
	ctx.SharedInformerFactory.Start(rootCtx.Done())
	ctx.KubeSharedInformerFactory.Start(rootCtx.Done())
	ctx.HTTP01ResourceMetadataInformersFactory.Start(rootCtx.Done())
	err = g.Wait()
	ctx.HTTP01ResourceMetadataInformersFactory.Shutdown()
	ctx.KubeSharedInformerFactory.Shutdown()
	ctx.SharedInformerFactory.Shutdown()
	if err != nil {
		return fmt.Errorf("error running controller: %v", err)
	}
	log.Info("control loops exited")
	return nil
}
