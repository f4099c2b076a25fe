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

{{- define "reloader.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if .Values.global.imageRegistry -}}
{{- printf "%s/%s:%s" .Values.global.imageRegistry .Values.image.name $tag -}}
{{- else if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
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

{{/* RBAC rules the controller needs, for the features that are on. */}}
{{- define "reloader.rules" -}}
{{- $resources := list -}}
{{- if not .Values.reloader.ignoreConfigMaps }}{{ $resources = append $resources "configmaps" }}{{ end -}}
{{- if not .Values.reloader.ignoreSecrets }}{{ $resources = append $resources "secrets" }}{{ end -}}
- apiGroups: [""]
  resources: {{ toJson $resources }}
  verbs: [get, list, watch]
- apiGroups: [apps]
  resources: [deployments, daemonsets, statefulsets]
  verbs: [get, list, watch, patch, update]
{{- if not .Values.reloader.ignoreCronJobs }}
- apiGroups: [batch]
  resources: [cronjobs]
  verbs: [get, list, watch]
{{- end }}
{{- if not (and .Values.reloader.ignoreJobs .Values.reloader.ignoreCronJobs) }}
- apiGroups: [batch]
  resources: [jobs]
  verbs: [get, list, watch, create, delete]
{{- end }}
{{- if .Values.reloader.isArgoRollouts }}
- apiGroups: [argoproj.io]
  resources: [rollouts]
  verbs: [get, list, watch, patch, update]
{{- end }}
{{- if .Values.reloader.isOpenshift }}
- apiGroups: [apps.openshift.io]
  resources: [deploymentconfigs]
  verbs: [get, list, watch, patch, update]
{{- end }}
{{- if .Values.reloader.enableCSIIntegration }}
- apiGroups: [secrets-store.csi.x-k8s.io]
  resources: [secretproviderclasspodstatuses, secretproviderclasses]
  verbs: [get, list, watch]
{{- end }}
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch]
{{- end -}}
