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

{{/* `<repository>@<digest>` or `<repository>:<tag>`; with global.imageRegistry the repository
is `<registry>/<image.name>`, and the digest still wins (Stakater's chart drops it there). */}}
{{- define "reloader.image" -}}
{{- $repository := .Values.image.repository -}}
{{- if .Values.global.imageRegistry -}}
{{- $repository = printf "%s/%s" (trimSuffix "/" .Values.global.imageRegistry) .Values.image.name -}}
{{- end -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The sorted, de-duplicated namespace list of scoped mode (release namespace included). */}}
{{- define "reloader.scopedNamespaces" -}}
{{- $raw := .Values.reloader.namespaces -}}
{{- if kindIs "string" $raw -}}{{- $raw = splitList "," $raw -}}{{- end -}}
{{- $out := list -}}
{{- range $raw -}}{{- $n := trim (toString .) -}}{{- if $n -}}{{- $out = append $out $n -}}{{- end -}}{{- end -}}
{{- if $out -}}{{- $out = append $out (include "reloader.namespace" .) -}}{{- end -}}
{{- $out | uniq | sortAlpha | join "," -}}
{{- end -}}

{{- define "reloader.ha" -}}
{{- if or .Values.reloader.enableHA (gt (int .Values.reloader.deployment.replicas) 1) -}}true{{- end -}}
{{- end -}}

{{/* RBAC rules the controller needs, for the features that are on: exactly the verbs it uses
(tests/integration/test_rbac.py runs every reload path under them). ConfigMaps, Secrets and
the other watched kinds are only LISTed and WATCHed (never read one by one); workloads are
written with PATCH only and read back with GET (conflicts, the CronJob template, the pause
period's resume, the Job about to be recreated); Events are only created. */}}
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
{{- if .Values.reloader.isOpenshift }}
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
{{- if or .Values.reloader.podReloads (eq .Values.reloader.defaultStrategy "evict") }}
# pod-level reloads (kube-reloader.io/strategy: evict): the pods are read, then evicted
- apiGroups: [""]
  resources: [pods]
  verbs: [list]
- apiGroups: [""]
  resources: [pods/eviction]
  verbs: [create]
{{- end }}
- apiGroups: [""]
  resources: [events]
  verbs: [create]
{{- end -}}
