{{/*
Chart name, overridable with nameOverride.
*/}}
{{- define "hptrain.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Full name: fullnameOverride, else the release name (plus the chart name when the release name
does not contain it).
*/}}
{{- define "hptrain.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Name of the controller's Deployment, ServiceAccount, ClusterRole and bindings.
*/}}
{{- define "hptrain.controllerName" -}}
{{- printf "%s-controller" (include "hptrain.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Labels that select the controller's pods (never change them on upgrade: a Deployment's
selector is immutable).
*/}}
{{- define "hptrain.selectorLabels" -}}
app.kubernetes.io/name: {{ include "hptrain.name" . }}-controller
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/*
Labels of every object the chart renders.
*/}}
{{- define "hptrain.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "hptrain.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: hptrain
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
ServiceAccount the controller runs as.
*/}}
{{- define "hptrain.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "hptrain.controllerName" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
Controller image; the tag defaults to the chart's appVersion.
*/}}
{{- define "hptrain.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/*
Namespace of the leader-election Lease.
*/}}
{{- define "hptrain.leaseNamespace" -}}
{{- default .Release.Namespace .Values.leaderElection.namespace -}}
{{- end -}}
