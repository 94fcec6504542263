{{/* The chart's name, 63 characters at most. */}}
{{- define "leaseapi.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The objects' name: the release name, with the chart's appended unless it contains it. */}}
{{- define "leaseapi.fullname" -}}
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

{{/* The labels that select the pods; they never change after install. */}}
{{- define "leaseapi.selectorLabels" -}}
app.kubernetes.io/name: {{ include "leaseapi.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The labels of every object. */}}
{{- define "leaseapi.labels" -}}
{{ include "leaseapi.selectorLabels" . }}
{{- if not (hasPrefix "sha256:" .Values.image.tag) }}
app.kubernetes.io/version: {{ .Values.image.tag | trunc 63 | trimSuffix "-" | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "leaseapi.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "leaseapi.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The image, by tag or by digest. */}}
{{- define "leaseapi.image" -}}
{{- $repo := required "image.repository is required: the registry and repository of the image built from leaseapi's Dockerfile" .Values.image.repository -}}
{{- $tag := required "image.tag is required: the tag (or sha256: digest) of that image" .Values.image.tag -}}
{{- if hasPrefix "sha256:" $tag -}}
{{- printf "%s@%s" $repo $tag -}}
{{- else -}}
{{- printf "%s:%s" $repo $tag -}}
{{- end -}}
{{- end -}}

{{/* http, or https when leaseapi serves TLS itself. */}}
{{- define "leaseapi.scheme" -}}
{{- if .Values.tls.enabled -}}https{{- else -}}http{{- end -}}
{{- end -}}
