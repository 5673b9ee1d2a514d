{{/* Names and labels, as `helm create` spells them. */}}
{{- define "gpuqos.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "gpuqos.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "gpuqos.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride }}
{{- end }}

{{- define "gpuqos.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpuqos.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "gpuqos.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "gpuqos.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "gpuqos.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "gpuqos.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "gpuqos.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* Where the image installs everything (deploy/Dockerfile: cmake --install
     with the default prefix). */}}
{{- define "gpuqos.bindir" -}}/usr/local/bin{{- end }}
{{- define "gpuqos.preemptLibInImage" -}}/usr/local/lib/gpuqos/libgpuqos-preempt.so{{- end }}

{{/* A container's securityContext: exactly the listed capabilities, or
     privileged when the privileged value asks for it. */}}
{{- define "gpuqos.securityContext" -}}
{{- if .root.Values.privileged }}
privileged: true
runAsUser: 0
{{- else }}
privileged: false
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsUser: 0
capabilities:
  drop: ["ALL"]
  {{- with .caps }}
  add:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
{{- end }}

{{/* The node agent's policy file (docs/policy.md). */}}
{{- define "gpuqos.policy" -}}
{{- $p := .Values.policy -}}
{{- /* What one field may hold is in values.schema.json (the severalBeUs
     floor and wake.holdUs without wake.leadUs included); these compare two
     fields, which a JSON schema cannot. tests/chart holds both to exactly
     what gpuqos-agent --check-config refuses. */ -}}
{{- if lt (int $p.timeslices.lcUs) (int $p.timeslices.beUs) -}}
{{- fail (printf "policy.timeslices.lcUs %v is below policy.timeslices.beUs (%v us): the node agent refuses such a file (an LC would run in shorter slices than the BE beside it; docs/policy.md)" $p.timeslices.lcUs $p.timeslices.beUs) -}}
{{- end -}}
{{- if lt (int $p.rotation.leaseMs) (mul 2 (int $p.rotation.periodMs)) -}}
{{- fail (printf "policy.rotation.leaseMs %v is below twice policy.rotation.periodMs (%v ms): the node agent refuses such a file (docs/policy.md)" $p.rotation.leaseMs $p.rotation.periodMs) -}}
{{- end -}}
{{- $doc := dict "version" 1
  "kubernetes" (dict "defaultClass" $p.defaultClass)
  "timeslices" (dict "lcUs" (int $p.timeslices.lcUs) "beUs" (int $p.timeslices.beUs) "severalBeUs" (int $p.timeslices.severalBeUs))
  "severalBe" $p.severalBe
  "rotation" (dict "periodMs" (int $p.rotation.periodMs) "leaseMs" (int $p.rotation.leaseMs) "inGap" $p.rotation.inGap)
  "busyLcPercent" (int $p.busyLcPercent)
  "wake" (dict "leadUs" (int $p.wake.leadUs) "holdUs" (int $p.wake.holdUs))
  "windows" (dict "beforeUs" (int $p.windows.beforeUs) "afterUs" (ternary "auto" (int $p.windows.afterUs) (eq (toString $p.windows.afterUs) "auto")) "maxOffPercent" (int $p.windows.maxOffPercent) "podMaxOffPercent" (int $p.windows.podMaxOffPercent))
  "allowUnsafeSeveralBe" $p.allowUnsafeSeveralBe
  "interleave" (dict "lc" $p.interleave.lc "be" $p.interleave.be)
  "manageCopyEngines" $p.manageCopyEngines
  "controlDeadlineMs" (int $p.controlDeadlineMs)
  "reconcileIntervalMs" (int $p.reconcileIntervalMs)
  "verifyIntervalS" (int $p.verifyIntervalS)
  "controlPath" $p.controlPath
  "memory" (include "gpuqos.policyMemory" $p.memory | fromJson) -}}
{{- toPrettyJson $doc }}
{{- end }}

{{/* policy.memory as the policy file's "memory" (JSON), each size held to
     the agent's 1Mi..1Pi: values.schema.json checks its grammar, a JSON
     schema cannot its value past the suffix. */}}
{{- define "gpuqos.policyMemory" -}}
{{- $m := . | default dict -}}
{{- $out := dict -}}
{{- if hasKey $m "lcReserve" -}}
{{- $_ := set $out "lcReserve" (include "gpuqos.size" (dict "v" $m.lcReserve "field" "policy.memory.lcReserve") | fromJson).v -}}
{{- end -}}
{{- if hasKey $m "defaults" -}}
{{- $d := dict -}}
{{- range $k, $v := $m.defaults -}}
{{- $_ := set $d $k (include "gpuqos.size" (dict "v" $v "field" (printf "policy.memory.defaults.%s" $k)) | fromJson).v -}}
{{- end -}}
{{- $_ := set $out "defaults" $d -}}
{{- end -}}
{{- toJson $out -}}
{{- end }}

{{/* {"v": size} for a size of the policy file: a string as written (a
     percent too), a number as whole bytes; fails past 1Mi..1Pi. */}}
{{- define "gpuqos.size" -}}
{{- $v := .v -}}
{{- if kindIs "string" $v -}}
{{- if not (hasSuffix "%" $v) -}}
{{- $num := regexFind "^[0-9]+" $v -}}
{{- $units := dict "" 1 "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 "Pi" 1125899906842624 "k" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 "P" 1000000000000000 -}}
{{- $mult := index $units (trimPrefix $num $v) | int64 -}}
{{- $n := atoi $num | int64 -}}
{{- if gt $n (div 1125899906842624 $mult) -}}
{{- fail (printf "%s %q is larger than 1Pi: the node agent refuses such a file (docs/policy.md, \"Memory\")" .field $v) -}}
{{- end -}}
{{- if lt (mul $n $mult) 1048576 -}}
{{- fail (printf "%s %q is smaller than 1Mi: the node agent refuses such a file (docs/policy.md, \"Memory\")" .field $v) -}}
{{- end -}}
{{- end -}}
{{- toJson (dict "v" $v) -}}
{{- else -}}
{{- toJson (dict "v" (int64 $v)) -}}
{{- end -}}
{{- end }}

{{/* The device plugin's config file (docs/device-plugin.md). Mode and
     paths are flags on its command line. */}}
{{- define "gpuqos.pluginConfig" -}}
{{- $d := .Values.devicePlugin -}}
{{- $doc := dict "version" 1
  "mode" $d.mode
  "resourceName" $d.resourceName
  "lcResourceName" $d.lcResourceName
  "replicas" (int $d.replicas)
  "lcReplicas" (int $d.lcReplicas)
  "injectResourceName" $d.injectResourceName
  "injectDevices" (int $d.injectDevices)
  "visibility" $d.visibility
  "injection" $d.injection
  "preferredAllocation" $d.preferredAllocation -}}
{{- toPrettyJson $doc }}
{{- end }}
