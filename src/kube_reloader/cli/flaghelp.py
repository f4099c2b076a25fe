"""What each controller flag does, in one or two lines, for `--help`; and the help formatter
that appends every option's default (`(default: …)`), so no default goes unsaid.

Reloader's flags are described after compat-spec §6.1 (v1.4) and §6.2 (v2); "Reloader
compatibility" marks the flags kept so Stakater's chart and its users' arguments keep working.
"""

from __future__ import annotations

import argparse

#: every command, with its one line for `kube-reloader --help`
COMMANDS = {
    "run": "run the controller (also with no command), with the flags below",
    "lint": "find reload annotations that will not work (manifests or a cluster)",
    "explain": "say why one workload would or would not reload, step by step",
    "impact": "preview what one ConfigMap/Secret change would reload, and when",
    "audit": "find workloads running old config that nothing will reload",
    "agent": "the in-place reload sidecar (restart-in-place, signal)",
    "dev-cluster": "a local Kubernetes control plane, to try things on",
    "version": "print the version (also --version)",
    "help": "this help, or a command's (kube-reloader help COMMAND)",
}
_ANNOTATION = "name of the annotation that "
#: flag -> help (the default is appended by `HelpFormatter`)
HELP = {
    "compat": "read the flags as Reloader v1.4 (v1) or Reloader v2 (v2) does; v2 also reads "
    "each of Reloader v2's flags from its environment variable (RELOAD_STRATEGY, ...)",
    "auto-reload-all": "reload on every referenced ConfigMap/Secret change, even without an "
    'auto annotation (workloads opt out with reloader.stakater.com/auto: "false")',
    "reconcile-on-start": "at start, reload workloads whose ConfigMaps/Secrets changed while "
    "no controller ran (false: Reloader's behaviour, only changes seen live)",
    "enable-ha": "leader election: only the replica holding the Lease reloads (needs the "
    "POD_NAME and POD_NAMESPACE environment variables)",
    "sync-after-restart": "Reloader compatibility: at start, treat every existing ConfigMap/"
    "Secret as created (acts only with --reload-on-create=true)",
    "enable-pprof": "serve the diagnostics listener on --pprof-addr (loopback for the default)",
    "enable-csi-integration": "reload on Secrets Store CSI rotations (SecretProviderClass); "
    "needs the CSI driver's API",
    "alert-on-reload": "send an alert (--alert-webhook-url) after each reload",
    "alert-structured": "Reloader v2: send the alert as structured JSON (raw sink only)",
    "leader-election-release-on-cancel": "give the Lease up on shutdown, so another replica "
    "takes over at once",
    "reload-tls-secrets": "reload workloads using a kubernetes.io/tls Secret (or "
    "cert-manager's) when it changes, with no annotation (ours)",
    "configmap-annotation": _ANNOTATION + "names the ConfigMaps whose changes reload",
    "secret-annotation": _ANNOTATION + "names the Secrets whose changes reload",
    "auto-annotation": _ANNOTATION + "reloads on any referenced ConfigMap or Secret",
    "ignore-annotation": _ANNOTATION + "makes a ConfigMap/Secret never cause a reload",
    "configmap-auto-annotation": _ANNOTATION + "reloads on any referenced ConfigMap",
    "secret-auto-annotation": _ANNOTATION + "reloads on any referenced Secret",
    "auto-search-annotation": _ANNOTATION + "reloads on referenced configs carrying the "
    "match annotation",
    "search-match-annotation": _ANNOTATION + "marks a ConfigMap/Secret for search workloads",
    "pause-deployment-annotation": _ANNOTATION + "pauses a Deployment for a period after a reload",
    "pause-deployment-time-annotation": _ANNOTATION + "records when a Deployment was paused",
    "configmap-exclude-annotation": _ANNOTATION + "lists ConfigMaps an auto workload ignores",
    "secret-exclude-annotation": _ANNOTATION + "lists Secrets an auto workload ignores",
    "secretproviderclass-annotation": _ANNOTATION + "names the SecretProviderClasses whose "
    "rotations reload",
    "secretproviderclass-auto-annotation": _ANNOTATION + "reloads on any referenced "
    "SecretProviderClass",
    "secretproviderclass-exclude-annotation": _ANNOTATION + "lists SecretProviderClasses an "
    "auto workload ignores",
    "alert-webhook-url": "where alerts are sent; a non-empty value turns alerts on",
    "alert-sink": "alert body format: slack, teams, gchat, anything else raw JSON",
    "alert-proxy": "HTTP proxy for alerts (environment: ALERT_PROXY or ALERT_WEBHOOK_PROXY)",
    "alert-additional-info": "text added to each alert",
    "leader-election-namespace": "namespace of the leader-election Lease (empty: POD_NAMESPACE)",
    "health-addr": "Reloader v2's /healthz and /readyz listener (served in v1 mode only "
    "when given; with --compat=v2, 0 turns it off)",
    "leader-election-id": "name of the leader-election Lease (default: stakater-reloader-lock; "
    "with --compat=v2 reloader-leader-election)",
    "resources-to-ignore": "configmaps or secrets: the kind whose changes never reload "
    "(comma-separated, repeatable)",
    "ignored-workload-types": "jobs and/or cronjobs: workload kinds never reloaded "
    "(with --compat=v2 any kind name)",
    "namespaces": "watch only these namespaces (comma-separated, repeatable; empty: "
    "KUBERNETES_NAMESPACE, else all)",
    "namespaces-to-ignore": "namespaces never watched (all-namespaces mode only)",
    "namespace-selector": "watch only namespaces matching this label selector (all-namespaces "
    "mode only; v1 also takes key:value and key:*)",
    "resource-label-selector": "only ConfigMaps/Secrets matching this label selector cause reloads",
    "log-format": "json, or empty for text (another value: a warning, then text; with "
    "--compat=v2, text or another value stops the start, as v2 does)",
    "log-level": "trace, debug, info, warn(ing), error, fatal or panic, in any case (with "
    "--compat=v2, exactly trace, debug, info, warn, warning or error, as v2 reads it)",
    "webhook-url": "POST each change to this URL instead of reloading (Reloader's webhook mode)",
    "is-Argo-Rollouts": "reload Argo Rollouts too (exactly true; v2 also 1 or yes); "
    "--is-argo-rollouts is accepted",
    "reload-strategy": "how a reload is written on the pod template: env-vars (an env var "
    "with the content hash) or annotations",
    "reload-on-create": "reload when a referenced ConfigMap/Secret is created (exactly true)",
    "reload-on-delete": "reload when a referenced ConfigMap/Secret is deleted (exactly true)",
    "pprof-addr": "address of the diagnostics listener (with --enable-pprof)",
    "is-openshift": "OpenShift DeploymentConfigs: empty or auto (detect), true, false",
    "kubeconfig": "kubeconfig file (default: KUBECONFIG, ~/.kube/config, then in-cluster)",
    "context": "kubeconfig context (default: the current context)",
    "workers": "concurrent workload patches",
    "metrics-addr": "address of /metrics, /live and /readyz (with --compat=v2, 0 turns it off)",
    "reload-coalesce-window": "changes to one workload within this window become one reload "
    "(0 disables)",
    "reload-min-interval": "minimum time between two reloads of one workload; later ones "
    "wait (0 disables)",
    "audit-interval": "time between two staleness audits by the leader (0 disables)",
    "reload-rate": "reloads per second, cluster-wide (0 disables the limit)",
    "reload-burst": "reloads allowed at once above --reload-rate",
    "leader-election-lease-duration": "how long a Lease is held without renewal",
    "leader-election-renew-deadline": "how long the leader retries renewing before it "
    "stops leading",
    "leader-election-retry-period": "time between two attempts to take or renew the Lease",
    "hash-algorithm": "content hash: sha1 (Reloader's values) or hmac-sha256 (keyed with "
    "--hash-key-secret; not Reloader-identical)",
    "hash-key-secret": "the Secret in POD_NAMESPACE holding the hmac-sha256 key (created on "
    "first start)",
    "reload-scope": "object: any change reloads; keys: only changes to the keys a workload "
    "consumes (kube-reloader.io/reload-scope overrides)",
    "default-strategy": "pod-level reloads without kube-reloader.io/strategy: patch (write "
    "the template) or evict (replace the pods)",
    "event-loop": "auto: uvloop where it is installed (as in the image) unless --admission-addr "
    "is set, else asyncio; asyncio: the standard library's; uvloop: libuv's",
    "workload-kind": "also reload this custom resource, whose pod template is at PATH "
    "(repeatable; default: none)",
}


class HelpFormatter(argparse.HelpFormatter):
    """Each option's help ends with its default; a pflag boolean shows as `--flag[=BOOL]`."""

    def _format_action_invocation(self, action: argparse.Action) -> str:
        if action.metavar == "BOOL":  # pflag: `--flag` or `--flag=false`, never `--flag false`
            return ", ".join(f"{flag}[=BOOL]" for flag in action.option_strings)
        return super()._format_action_invocation(action)

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if "(default" in text or not action.option_strings or action.nargs == 0:
            return text  # said already, a positional, or a switch (-h, store_true)
        if action.default is None or action.default is argparse.SUPPRESS:
            return text
        return f"{text} (default: {shown(action.default)})"


class OverviewFormatter(argparse.RawDescriptionHelpFormatter, HelpFormatter):
    """`HelpFormatter`, with the description and epilog as written (the command table)."""


def shown(default: object) -> str:
    """A default as the user would type it (`%` escaped for argparse)."""
    if isinstance(default, bool):
        text = str(default).lower()
    elif default == "" or default == []:
        text = "empty" if default == "" else "none"
    elif isinstance(default, float) and default.is_integer():
        text = str(int(default))
    else:
        text = str(default)
    return text.replace("%", "%%")
