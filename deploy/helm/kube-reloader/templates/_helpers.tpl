{{/* Naming follows Stakater's chart so that selectors and in-place upgrades keep working. */}}
{{- define "reloader.name" -}}
{{- default "reloader" .Values.nameOverride | trunc 63 | lower | trimSuffix "-" -}}
{{- end -}}

{{- define "reloader.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "reloader.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "reloader.namespace" -}}
{{- default .Release.Namespace .Values.namespace -}}
{{- end -}}

{{- define "reloader.selectorLabels" -}}
app: {{ include "reloader.fullname" . }}
release: {{ .Release.Name | quote }}
{{- with .Values.reloader.matchLabels }}
{{ tpl (toYaml .) $ }}
{{- end }}
{{- end -}}

{{- define "reloader.labels" -}}
{{ include "reloader.selectorLabels" . }}
app.kubernetes.io/name: {{ include "reloader.name" . }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
heritage: {{ .Release.Service }}
{{- end -}}

{{- define "reloader.serviceAccountName" -}}
{{- if .Values.reloader.serviceAccount.create -}}
{{- default (include "reloader.fullname" .) .Values.reloader.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.reloader.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* `<repository>:<tag>`, `<repository>@<digest>`, or both (`<repository>:<tag>@<digest>`: the
digest is what is pulled); with global.imageRegistry the repository is `<registry>/<image.name>`,
and the digest is kept (Stakater's chart drops it there). */}}
{{- define "reloader.image" -}}
{{- $repository := .Values.image.repository -}}
{{- if and .Values.global.imageRegistry .Values.image.name -}}
{{- $repository = printf "%s/%s" (trimSuffix "/" .Values.global.imageRegistry) .Values.image.name -}}
{{- end -}}
{{- if and .Values.global.imageRegistry (not .Values.image.name) -}}
{{- fail "global.imageRegistry is set but image.name is empty: set image.name to the name of the kube-reloader image you pushed under that registry (built with `make image`)" -}}
{{- end -}}
{{- if not $repository -}}
{{- fail "image.repository is not set: this chart has no default image; build one with `make image`, push it to your registry and set image.repository (or global.imageRegistry)" -}}
{{- end -}}
{{- if regexMatch "(^|/)stakater/reloader$" $repository -}}
{{- fail (printf "the image %s is Stakater Reloader's, left from its values file: this chart runs kube-reloader; build it with `make image`, push it and set image.repository (with global.imageRegistry, image.name)" $repository) -}}
{{- end -}}
{{- if and .Values.image.digest .Values.image.tag -}}
{{- printf "%s:%s@%s" $repository .Values.image.tag .Values.image.digest -}}
{{- else if .Values.image.digest -}}
{{- printf "%s@%s" $repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* "true" when reloader.compat is v2: the binary writes Reloader v2's wire format, serves
/healthz and /readyz on the health port, and the chart renders as Stakater's v2 chart (3.x). */}}
{{- define "reloader.v2" -}}
{{- if eq (toString (default "v1" .Values.reloader.compat)) "v2" -}}true{{- end -}}
{{- end -}}

{{/* The container's resources: as given; with compat v2, this chart's own defaults (the
values file's) are not applied, as Stakater's v2 chart sets none (`resources: {}`). */}}
{{- define "reloader.resources" -}}
{{- $given := .Values.reloader.deployment.resources | default dict -}}
{{- $ours := dict "requests" (dict "cpu" "10m" "memory" "96Mi") "limits" (dict "memory" "512Mi") -}}
{{- if not (and (include "reloader.v2" .) (eq (toJson $given) (toJson $ours))) -}}
{{- toYaml $given -}}
{{- end -}}
{{- end -}}

{{/* "true" when --webhook-url is rendered: whenever reloader.webhookUrl is set, but with compat
v2 only when reloader.custom_annotations is not empty either, as Stakater's v2 chart renders it
(NOTES.txt says so when the URL is left out). */}}
{{- define "reloader.webhookUrl" -}}
{{- if and .Values.reloader.webhookUrl (or (not (include "reloader.v2" .)) .Values.reloader.custom_annotations) -}}true{{- end -}}
{{- end -}}

{{/* The sorted, de-duplicated namespace list of scoped mode. With compat v1 the release
namespace is added (as Stakater's chart 2.x does); with v2 it is exactly the list given (as
Stakater's v2 chart: the release namespace is not watched unless listed). */}}
{{- define "reloader.scopedNamespaces" -}}
{{- $raw := .Values.reloader.namespaces -}}
{{- if kindIs "string" $raw -}}{{- $raw = splitList "," $raw -}}{{- end -}}
{{- $out := list -}}
{{- range $raw -}}{{- $n := trim (toString .) -}}{{- if $n -}}{{- $out = append $out $n -}}{{- end -}}{{- end -}}
{{- if and $out (not (include "reloader.v2" .)) -}}{{- $out = append $out (include "reloader.namespace" .) -}}{{- end -}}
{{- $out | uniq | sortAlpha | join "," -}}
{{- end -}}

{{/* The Lease of --enable-ha: the binary's default name in each compat mode. */}}
{{- define "reloader.leaseName" -}}
{{- ternary "reloader-leader-election" "stakater-reloader-lock" (eq (include "reloader.v2" .) "true") -}}
{{- end -}}

{{- define "reloader.ha" -}}
{{- if or .Values.reloader.enableHA (gt (int .Values.reloader.deployment.replicas) 1) -}}true{{- end -}}
{{- end -}}

{{/* RBAC rules the controller needs, for the features that are on: exactly the verbs it uses
(tests/integration/test_rbac.py runs every reload path under them). ConfigMaps, Secrets and
the other watched kinds are only LISTed and WATCHed (never read one by one); workloads are
written with PATCH only and read back with GET (conflicts, the CronJob template, the pause
period's resume, the Job about to be recreated); pods are only LISTed (one workload's, by its
selector); Events are only created. */}}
{{- define "reloader.rules" -}}
{{- $resources := list -}}
{{- if not .Values.reloader.ignoreConfigMaps }}{{ $resources = append $resources "configmaps" }}{{ end -}}
{{- if not .Values.reloader.ignoreSecrets }}{{ $resources = append $resources "secrets" }}{{ end -}}
- apiGroups: [""]
  resources: {{ toJson $resources }}
  verbs: [list, watch]
- apiGroups: [apps]
  resources: [deployments, daemonsets, statefulsets]
  verbs: [get, list, watch, patch]
{{- if not .Values.reloader.ignoreCronJobs }}
- apiGroups: [batch]
  resources: [cronjobs]
  verbs: [get, list, watch]
{{- end }}
{{- if not .Values.reloader.ignoreJobs }}
- apiGroups: [batch]
  resources: [jobs]
  verbs: [get, list, watch, create, delete]
{{- else if not .Values.reloader.ignoreCronJobs }}
# the Job that a CronJob's reload starts
- apiGroups: [batch]
  resources: [jobs]
  verbs: [create]
{{- end }}
{{- if .Values.reloader.isArgoRollouts }}
- apiGroups: [argoproj.io]
  resources: [rollouts]
  verbs: [get, list, watch, patch]
{{- end }}
{{- if and .Values.reloader.isOpenshift (or (not (include "reloader.v2" .)) (.Capabilities.APIVersions.Has "apps.openshift.io/v1")) }}
{{- /* with compat v2, as Stakater's v2 chart: only where the API is served */}}
- apiGroups: [apps.openshift.io]
  resources: [deploymentconfigs]
  verbs: [get, list, watch, patch]
{{- end }}
{{- if .Values.reloader.enableCSIIntegration }}
- apiGroups: [secrets-store.csi.x-k8s.io]
  resources: [secretproviderclasspodstatuses, secretproviderclasses]
  verbs: [list, watch]
{{- end }}
{{- range .Values.reloader.workloadKinds }}
{{- $gvr := splitList "/" (index (splitList ":" .) 0) }}
- apiGroups: [{{ index $gvr 0 | quote }}]
  resources: [{{ index $gvr 2 | quote }}]
  verbs: [get, list, watch, patch]
{{- end }}
# a workload's pods, listed before rolling it on time alone (a change missed while not
# watching whose pods may run it already), and before evicting them
- apiGroups: [""]
  resources: [pods]
  verbs: [list]
{{- if or .Values.reloader.podReloads (eq .Values.reloader.defaultStrategy "evict") }}
# pod-level reloads (kube-reloader.io/strategy: evict)
- apiGroups: [""]
  resources: [pods/eviction]
  verbs: [create]
{{- end }}
{{- if .Values.reloader.inPlaceReloads }}
# in-place reloads (kube-reloader.io/strategy: restart-in-place or signal): one annotation
# written on a workload's pod at a time, read there by the kube-reloader agent sidecar
- apiGroups: [""]
  resources: [pods]
  verbs: [patch]
{{- end }}
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch]
{{- if include "reloader.v2" . }}
# Reloader v2's reload Events (Reloaded, ReloadFailed), as v2 records them: created, and
# patched with the count of a series of repeated ones
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create, patch]
{{- end }}
{{- end -}}

{{/* Fails the render, in one line naming the key, on a key the chart does not read (a typo, or
a key of another chart version): a values key is rendered or refused, never silently dropped.
Takes dict "path" "reloader.x" "values" <the map> "allowed" <list of keys>. */}}
{{- define "reloader.knownKeys" -}}
{{- $path := .path -}}
{{- $allowed := .allowed -}}
{{- if kindIs "map" .values -}}
{{- range $key := keys .values | sortAlpha -}}
{{- if not (has $key $allowed) -}}
{{- fail (printf "%s.%s: not a key of this chart (%s takes %s)" $path $key $path (join ", " (sortAlpha $allowed))) -}}
{{- end -}}
{{- end -}}
{{- else if not (kindIs "invalid" .values) -}}
{{- fail (printf "%s must be a map" $path) -}}
{{- end -}}
{{- end -}}

{{/* The keys of the monitor blocks (monitoring.yaml renders each of them). */}}
{{- define "reloader.monitorKeys" -}}
{{- $common := list "enabled" "namespace" "interval" "scheme" "tlsConfig" "timeout" "labels" "annotations" "honorLabels" "metricRelabelings" "relabelings" -}}
{{- toJson (dict
  "serviceMonitor" (concat $common (list "bearerTokenFile" "targetLabels"))
  "podMonitor" (concat $common (list "bearerTokenSecret" "podTargetLabels"))) -}}
{{- end -}}

{{/* reloader.custom_annotations: each key's flag (chart 2.x's ten, and the five Stakater's v2
chart adds). */}}
{{- define "reloader.annotationFlags" -}}
{{- toJson (dict
  "configmap" "--configmap-annotation" "secret" "--secret-annotation" "auto" "--auto-annotation"
  "secret_auto" "--secret-auto-annotation" "configmap_auto" "--configmap-auto-annotation"
  "search" "--auto-search-annotation" "match" "--search-match-annotation" "ignore" "--ignore-annotation"
  "pausePeriod" "--pause-deployment-annotation" "pauseTime" "--pause-deployment-time-annotation"
  "configmap_exclude" "--configmap-exclude-annotation" "secret_exclude" "--secret-exclude-annotation"
  "secretproviderclass" "--secretproviderclass-annotation"
  "secretproviderclass_auto" "--secretproviderclass-auto-annotation"
  "secretproviderclass_exclude" "--secretproviderclass-exclude-annotation") -}}
{{- end -}}

{{/* Fails the render, naming the key, where `values` differs from `defaults` (keys of
Stakater's v2 chart that only its Enterprise subchart reads: accepted at their defaults, so a
copied values file installs, and refused otherwise). A key without a default must be empty.
Takes dict "path" "enterprise" "values" <the map> "defaults" <the map> "why" <the reason>. */}}
{{- define "reloader.atDefaults" -}}
{{- $top := . -}}
{{- range $key := keys (default dict .values) | sortAlpha -}}
{{- $path := printf "%s.%s" $top.path $key -}}
{{- $value := index $top.values $key -}}
{{- $hasDefault := hasKey $top.defaults $key -}}
{{- $default := ternary (index $top.defaults $key) nil $hasDefault -}}
{{- if kindIs "map" $value -}}
{{- include "reloader.atDefaults" (dict "path" $path "values" $value "defaults" (ternary $default (dict) (kindIs "map" $default)) "why" $top.why) -}}
{{- else if and $hasDefault (not (kindIs "map" $default)) (eq (toJson $value) (toJson $default)) -}}
{{- else if and (not $hasDefault) (empty $value) -}}
{{- else -}}
{{- fail (printf "%s: %s; only %s is accepted: remove it" $path $top.why (ternary (printf "its default, %s," (toJson $default)) "an empty value" $hasDefault)) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "reloader.logLevels" -}}trace,debug,info,warning,warn,error,fatal,panic{{- end -}}

{{/* Checks of the values as a whole, run by deployment.yaml. Adding a values key means adding it
to the lists below (the default values fail to render otherwise). */}}
{{- define "reloader.validate" -}}
{{- $r := .Values.reloader -}}
{{- include "reloader.knownKeys" (dict "path" "image" "values" .Values.image
    "allowed" (list "repository" "name" "tag" "digest" "pullPolicy")) -}}
{{- include "reloader.knownKeys" (dict "path" "reloader" "values" $r "allowed" (list
    "autoReloadAll" "isArgoRollouts" "isOpenshift" "ignoreSecrets" "ignoreConfigMaps" "ignoreJobs"
    "ignoreCronJobs" "reloadOnCreate" "reloadOnDelete" "syncAfterRestart" "reloadStrategy"
    "ignoreNamespaces" "namespaceSelector" "resourceLabelSelector" "logFormat" "logLevel"
    "watchGlobally" "namespaces" "enableHA" "enablePProf" "enableCSIIntegration" "pprofAddr"
    "readOnlyRootFileSystem" "legacy" "matchLabels" "enableMetricsByNamespace" "deployment"
    "service" "rbac" "serviceAccount" "custom_annotations" "serviceMonitor" "podMonitor"
    "podDisruptionBudget" "netpol" "verticalPodAutoscaler" "webhookUrl"
    "hashAlgorithm" "defaultStrategy" "reloadScope" "reloadTlsSecrets" "podReloads" "inPlaceReloads" "workloadKinds" "maxConcurrentRollouts"
    "haltAfterFailures" "freeze" "namespacePolicies" "leaderElection" "workers" "grafanaDashboard"
    "compat" "auditInterval" "admission")) -}}
{{- $adm := default dict $r.admission -}}
{{- include "reloader.knownKeys" (dict "path" "reloader.admission" "values" $adm
    "allowed" (list "enabled" "port" "timeoutSeconds" "namespaceSelector" "certValidity"
    "grace" "clientCAConfigMap" "clientNames")) -}}
{{- if not (has (toString (default 2 $adm.timeoutSeconds)) (list "1" "2")) -}}
{{- fail (printf "reloader.admission.timeoutSeconds: %v must be 1 or 2 (the webhook must never slow writes down)" $adm.timeoutSeconds) -}}
{{- end -}}
{{- $d := default dict $r.deployment -}}
{{- include "reloader.knownKeys" (dict "path" "reloader.deployment" "values" $d "allowed" (list
    "dnsConfig" "replicas" "revisionHistoryLimit" "hostUsers" "nodeSelector" "affinity" "volumeMounts"
    "volumes" "securityContext" "containerSecurityContext" "tolerations" "topologySpreadConstraints"
    "annotations" "labels" "env" "livenessProbe" "readinessProbe" "resources" "pod" "priorityClassName"
    "imagePullSecrets" "gomaxprocsOverride" "gomemlimitOverride" "automountServiceAccountToken"
    "runtimeClassName" "schedulerName")) -}}
{{- include "reloader.knownKeys" (dict "path" "reloader.deployment.env" "values" $d.env
    "allowed" (list "open" "secret" "existing" "field")) -}}
{{- include "reloader.knownKeys" (dict "path" "reloader.deployment.pod" "values" $d.pod
    "allowed" (list "annotations")) -}}
{{- include "reloader.knownKeys" (dict "path" "reloader.custom_annotations" "values" $r.custom_annotations
    "allowed" (keys (include "reloader.annotationFlags" . | fromJson))) -}}
{{- include "reloader.knownKeys" (dict "path" "reloader.service" "values" $r.service
    "allowed" (list "port" "labels" "annotations" "ipFamilyPolicy" "ipFamilies")) -}}
{{- include "reloader.knownKeys" (dict "path" "reloader.rbac" "values" $r.rbac
    "allowed" (list "enabled" "labels")) -}}
{{- include "reloader.knownKeys" (dict "path" "reloader.serviceAccount" "values" $r.serviceAccount
    "allowed" (list "create" "name" "labels" "annotations" "automountServiceAccountToken")) -}}
{{- include "reloader.knownKeys" (dict "path" "reloader.podDisruptionBudget" "values" $r.podDisruptionBudget
    "allowed" (list "enabled" "minAvailable" "maxUnavailable")) -}}
{{- include "reloader.knownKeys" (dict "path" "reloader.netpol" "values" $r.netpol
    "allowed" (list "enabled" "from" "to" "apiServerPorts" "extraEgressPorts")) -}}
{{- include "reloader.knownKeys" (dict "path" "reloader.verticalPodAutoscaler" "values" $r.verticalPodAutoscaler
    "allowed" (list "enabled" "recommenders" "controlledResources" "controlledValues" "maxAllowed" "minAllowed" "updatePolicy")) -}}
{{- range $key, $allowed := include "reloader.monitorKeys" . | fromJson -}}
{{- include "reloader.knownKeys" (dict "path" (printf "reloader.%s" $key) "values" (index $r $key) "allowed" $allowed) -}}
{{- end -}}
{{- $compat := toString (default "v1" $r.compat) -}}
{{- if not (has $compat (list "v1" "v2")) -}}
{{- fail (printf "reloader.compat: %q is not v1 (Stakater Reloader v1.4.x, chart 2.x) or v2 (Reloader v2, Stakater's v2 chart)" $compat) -}}
{{- end -}}
{{- if not $r.compat -}}
{{- range $key := list "configmap_exclude" "secret_exclude" "secretproviderclass" "secretproviderclass_auto" "secretproviderclass_exclude" -}}
{{- if index (default dict $r.custom_annotations) $key -}}
{{- fail (printf "reloader.custom_annotations.%s is read only by Stakater's v2 chart: set reloader.compat: v2 to replace Reloader v2 (or v1 to keep Reloader v1's behaviour)" $key) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $enterprise := "Reloader Enterprise (the enterprise subchart of Stakater's v2 chart) is not part of kube-reloader" -}}
{{- include "reloader.atDefaults" (dict "path" "enterprise" "values" (default dict .Values.enterprise) "why" $enterprise
    "defaults" (dict "enabled" false "console" (dict "enabled" true) "gateway" (dict "enabled" true "dragonfly" (dict "enabled" true))
                     "dragonfly" (dict "fullnameOverride" "reloader-enterprise-dragonfly"))) -}}
{{- $global := pick (default dict .Values.global) "consoleHost" "gatewayHost" "gatewayScheme" -}}
{{- include "reloader.atDefaults" (dict "path" "global" "values" $global "why" "only Reloader Enterprise (the enterprise subchart of Stakater's v2 chart) reads it, and it is not part of kube-reloader"
    "defaults" (dict "consoleHost" "" "gatewayHost" "" "gatewayScheme" "https")) -}}
{{- $level := lower (toString (default "" $r.logLevel)) -}}
{{- if include "reloader.v2" . -}}
{{- /* Reloader v2 stops at start on any other spelling; so does --compat=v2: fail here instead */ -}}
{{- if not (has (toString (default "" $r.logLevel)) (list "" "trace" "debug" "info" "warn" "warning" "error")) -}}
{{- fail (printf "reloader.logLevel: %q is not one of trace, debug, info, warn, warning, error (with compat v2, exactly as Reloader v2 reads it)" (toString $r.logLevel)) -}}
{{- end -}}
{{- if not (has (toString (default "" $r.logFormat)) (list "" "json")) -}}
{{- fail (printf "reloader.logFormat: %q is not json or empty (with compat v2, as Reloader v2 reads it)" (toString $r.logFormat)) -}}
{{- end -}}
{{- else if and $level (not (has $level (splitList "," (include "reloader.logLevels" .)))) -}}
{{- fail (printf "reloader.logLevel: %q is not one of %s (any case)" (toString $r.logLevel) (include "reloader.logLevels" . | splitList "," | join ", ")) -}}
{{- end -}}
{{- if and (not $r.watchGlobally) $r.ignoreNamespaces -}}
{{- fail "reloader.ignoreNamespaces needs reloader.watchGlobally: true (a namespaced install watches only its namespaces)" -}}
{{- end -}}
{{- if and (not $r.watchGlobally) $r.namespaceSelector -}}
{{- fail "reloader.namespaceSelector needs reloader.watchGlobally: true (a namespaced install watches only its namespaces)" -}}
{{- end -}}
{{- $pdb := default dict $r.podDisruptionBudget -}}
{{- if and $pdb.enabled (not (kindIs "invalid" (index $pdb "minAvailable"))) (not (kindIs "invalid" (index $pdb "maxUnavailable"))) -}}
{{- fail "reloader.podDisruptionBudget: set minAvailable or maxUnavailable, not both" -}}
{{- end -}}
{{- range $name, $path := dig "env" "field" dict $d -}}
{{- if empty $path -}}
{{- fail (printf "reloader.deployment.env.field.%s needs a field path (e.g. metadata.name)" $name) -}}
{{- end -}}
{{- end -}}
{{- range $key := list "gomaxprocsOverride" "gomemlimitOverride" -}}
{{- $value := get $d $key -}}
{{- if not (or (kindIs "invalid" $value) (eq (toString $value) "")) -}}
{{- fail (printf "reloader.deployment.%s tunes the Go runtime; kube-reloader is not a Go program: remove it" $key) -}}
{{- end -}}
{{- end -}}
{{- $legacy := default dict $r.legacy -}}
{{- include "reloader.knownKeys" (dict "path" "reloader.legacy" "values" $r.legacy "allowed" (list "rbac")) -}}
{{- if $legacy.rbac -}}
{{- fail "reloader.legacy.rbac: true is not supported: the chart renders rbac.authorization.k8s.io/v1 only" -}}
{{- end -}}
{{- $host := toString (default "" (dig "host" "" (default dict .Values.kubernetes))) -}}
{{- if and $host (ne $host "https://kubernetes.default") -}}
{{- fail "kubernetes.host is not used (the controller finds the API server in-cluster, as Stakater's does): remove it" -}}
{{- end -}}
{{- end -}}

{{/* A probe: the values' keys as given, the timings Stakater's chart defaults filled in, and
an httpGet on `path` at `port` unless the values give a handler. */}}
{{- define "reloader.probe" -}}
{{- $p := deepCopy (default dict .probe) -}}
{{- if not (or (hasKey $p "httpGet") (hasKey $p "exec") (hasKey $p "tcpSocket") (hasKey $p "grpc")) -}}
{{- $_ := set $p "httpGet" (dict "path" .path "port" .port) -}}
{{- end -}}
{{- $defaults := dict "timeoutSeconds" 5 "failureThreshold" 5 "periodSeconds" 10 "successThreshold" 1 "initialDelaySeconds" .initialDelaySeconds -}}
{{- range $key, $value := $defaults -}}
{{- if not (hasKey $p $key) -}}{{- $_ := set $p $key $value -}}{{- end -}}
{{- end -}}
{{- toYaml $p -}}
{{- end -}}
