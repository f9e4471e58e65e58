{{/* Chart name, truncated to a DNS label. */}}
{{- define "draforge.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Release-scoped base name. */}}
{{- define "draforge.fullname" -}}
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

{{- define "draforge.server.fullname" -}}
{{- printf "%s-server" (include "draforge.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "draforge.controller.fullname" -}}
{{- printf "%s-controller" (include "draforge.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "draforge.controller.metricsServiceName" -}}
{{- printf "%s-controller-metrics" (include "draforge.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "draforge.machinesConfigMapName" -}}
{{- printf "%s-machines" (include "draforge.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels shared by every object. */}}
{{- define "draforge.commonLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: draforge
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
Selector labels. app.kubernetes.io/name is draforge-api-server / draforge-controller so the
log selectors of the operations guide (kubectl logs -l app.kubernetes.io/name=...) match.
*/}}
{{- define "draforge.server.selectorLabels" -}}
app.kubernetes.io/name: draforge-api-server
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: api-server
{{- end -}}

{{- define "draforge.controller.selectorLabels" -}}
app.kubernetes.io/name: draforge-controller
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end -}}

{{- define "draforge.labels" -}}
app.kubernetes.io/name: {{ include "draforge.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{ include "draforge.commonLabels" . }}
{{- end -}}

{{- define "draforge.server.labels" -}}
{{ include "draforge.server.selectorLabels" . }}
{{ include "draforge.commonLabels" . }}
{{- end -}}

{{- define "draforge.controller.labels" -}}
{{ include "draforge.controller.selectorLabels" . }}
{{ include "draforge.commonLabels" . }}
{{- end -}}

{{/* image: repository:tag, tag defaulting to the chart appVersion. Argument: the component's image dict + root. */}}
{{- define "draforge.image" -}}
{{- $img := index . 0 -}}
{{- $root := index . 1 -}}
{{- printf "%s:%s" $img.repository (default $root.Chart.AppVersion $img.tag) -}}
{{- end -}}

{{/*
A duration value as the string passed to the binary. The integer 0 (documented for
readinessGracePeriod) becomes "0s"; strings pass through unchanged.
*/}}
{{- define "draforge.duration" -}}
{{- if or (kindIs "float64" .) (kindIs "int" .) (kindIs "int64" .) -}}
{{- printf "%ds" (int .) -}}
{{- else -}}
{{- . -}}
{{- end -}}
{{- end -}}

{{/*
Milliseconds of a Go-style duration made of ms/s/m/h terms (for example 1m30s), as a decimal
string; "invalid" when the value does not have that form. Used by validation.yaml.
*/}}
{{- define "draforge.durationMs" -}}
{{- $d := include "draforge.duration" . -}}
{{- if eq $d "0" -}}0
{{- else if not (regexMatch "^([0-9]+(ms|s|m|h))+$" $d) -}}invalid
{{- else -}}
{{- $total := 0 -}}
{{- range $term := regexFindAll "[0-9]+(ms|s|m|h)" $d -1 -}}
{{- $n := int64 (regexFind "^[0-9]+" $term) -}}
{{- $unit := regexReplaceAll "^[0-9]+" $term "" -}}
{{- $mul := 1 -}}
{{- if eq $unit "s" }}{{ $mul = 1000 }}{{ else if eq $unit "m" }}{{ $mul = 60000 }}{{ else if eq $unit "h" }}{{ $mul = 3600000 }}{{ end -}}
{{- $total = add $total (mul $n $mul) -}}
{{- end -}}
{{- $total -}}
{{- end -}}
{{- end -}}

{{/* NetworkPolicy egress: DNS and the Kubernetes API server only. */}}
{{- define "draforge.egressRules" -}}
# DNS.
- to:
    - namespaceSelector:
        {{- toYaml .Values.networkPolicies.dns.namespaceSelector | nindent 8 }}
      podSelector:
        {{- toYaml .Values.networkPolicies.dns.podSelector | nindent 8 }}
  ports:
    - port: 53
      protocol: UDP
    - port: 53
      protocol: TCP
# The Kubernetes API server.
- ports:
    {{- range .Values.networkPolicies.apiServer.ports }}
    - port: {{ . }}
      protocol: TCP
    {{- end }}
  {{- with .Values.networkPolicies.apiServer.cidrs }}
  to:
    {{- range . }}
    - ipBlock:
        cidr: {{ . }}
    {{- end }}
  {{- end }}
{{- end }}

{{- define "draforge.kubeletPlugin.fullname" -}}
{{- printf "%s-kubelet-plugin" (include "draforge.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "draforge.kubeletPlugin.selectorLabels" -}}
app.kubernetes.io/name: draforge-kubelet-plugin
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: kubelet-plugin
{{- end -}}

{{- define "draforge.kubeletPlugin.labels" -}}
{{ include "draforge.kubeletPlugin.selectorLabels" . }}
{{ include "draforge.commonLabels" . }}
{{- end -}}
