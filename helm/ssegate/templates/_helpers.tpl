{{/* Names and labels shared by every object. */}}
{{- define "ssegate.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}{{ .Release.Name | trunc 50 | trimSuffix "-" }}{{- else -}}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "ssegate.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "ssegate.gatewaySelector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: gateway
{{- end -}}

{{- define "ssegate.ingestSelector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: ingest
{{- end -}}

{{- define "ssegate.image" -}}
{{- $img := index .root.Values.image .which -}}
{{ $img.repository }}:{{ default .root.Chart.AppVersion $img.tag }}
{{- end -}}

{{/*
The grace period comes from the drain: the endpoint-propagation window, the drain window, the write timeout
a last write may take, and a margin. A pod always finishes draining before it is killed.
*/}}
{{- define "ssegate.gracePeriod" -}}
{{- add .Values.gateway.endpointPropagationSeconds .Values.gateway.drainSeconds .Values.gateway.writeTimeoutSeconds 5 -}}
{{- end -}}

{{/* The restricted Pod Security Standard, for every container. */}}
{{- define "ssegate.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "ssegate.podSecurity" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Kafka connection settings as configuration-file keys, and the volumes and env they need. */}}
{{- define "ssegate.kafkaConfig" -}}
kafka-brokers: {{ required "kafka.brokers is required" (join "," .Values.kafka.brokers) | quote }}
kafka-client-id: {{ .Values.kafka.clientId | quote }}
{{- if .Values.kafka.tls.enabled }}
kafka-tls: true
{{- with .Values.kafka.tls.caSecret }}
kafka-tls-ca-file: /etc/ssegate/kafka-ca/ca.crt
{{- end }}
{{- with .Values.kafka.tls.clientCertSecret }}
kafka-tls-cert-file: /etc/ssegate/kafka-client/tls.crt
kafka-tls-key-file: /etc/ssegate/kafka-client/tls.key
{{- end }}
{{- with .Values.kafka.tls.serverName }}
kafka-tls-server-name: {{ . | quote }}
{{- end }}
{{- end }}
{{- with .Values.kafka.sasl.mechanism }}
kafka-sasl-mechanism: {{ . | quote }}
kafka-sasl-username: {{ $.Values.kafka.sasl.username | quote }}
kafka-sasl-password-file: /etc/ssegate/kafka-sasl/password
{{- end }}
{{- end -}}

{{- define "ssegate.kafkaVolumeMounts" -}}
{{- if and .Values.kafka.tls.enabled .Values.kafka.tls.caSecret }}
- {name: kafka-ca, mountPath: /etc/ssegate/kafka-ca, readOnly: true}
{{- end }}
{{- if and .Values.kafka.tls.enabled .Values.kafka.tls.clientCertSecret }}
- {name: kafka-client, mountPath: /etc/ssegate/kafka-client, readOnly: true}
{{- end }}
{{- if .Values.kafka.sasl.mechanism }}
- {name: kafka-sasl, mountPath: /etc/ssegate/kafka-sasl, readOnly: true}
{{- end }}
{{- end -}}

{{- define "ssegate.kafkaVolumes" -}}
{{- if and .Values.kafka.tls.enabled .Values.kafka.tls.caSecret }}
- name: kafka-ca
  secret: {secretName: {{ .Values.kafka.tls.caSecret | quote }}}
{{- end }}
{{- if and .Values.kafka.tls.enabled .Values.kafka.tls.clientCertSecret }}
- name: kafka-client
  secret: {secretName: {{ .Values.kafka.tls.clientCertSecret | quote }}}
{{- end }}
{{- if .Values.kafka.sasl.mechanism }}
- name: kafka-sasl
  secret:
    secretName: {{ required "kafka.sasl.passwordSecret.name is required with SASL" .Values.kafka.sasl.passwordSecret.name | quote }}
    items:
      - {key: {{ .Values.kafka.sasl.passwordSecret.key | quote }}, path: password}
{{- end }}
{{- end -}}

{{/*
ssegate.bytes: a byte size as the gateway takes it (65536, 64MiB, 1GiB, 100MB) or a Kubernetes quantity in
whole units (512Mi, 2Gi), in bytes.
*/}}
{{- define "ssegate.bytes" -}}
{{- $s := toString . | trim -}}
{{- $n := regexFind "^[0-9]+" $s -}}
{{- $u := trim (substr (len $n) (len $s) $s) -}}
{{- $mult := dict "" 1 "B" 1 "KiB" 1024 "MiB" 1048576 "GiB" 1073741824 "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "KB" 1000 "MB" 1000000 "GB" 1000000000 "k" 1000 "M" 1000000 "G" 1000000000 -}}
{{- if or (eq $n "") (not (hasKey $mult $u)) -}}
{{- fail (printf "%q is not a byte size (a whole number, optionally with KiB, MiB, GiB, Ki, Mi or Gi)" $s) -}}
{{- end -}}
{{- mul (atoi $n) (get $mult $u) -}}
{{- end -}}

{{/*
ssegate.ringMemory: bytes the gateway's rings may hold together: the budget, or each topic's ring size summed.
*/}}
{{- define "ssegate.ringMemory" -}}
{{- $g := .Values.gateway -}}
{{- if $g.ringBudget -}}
{{- include "ssegate.bytes" $g.ringBudget -}}
{{- else -}}
{{- $sum := 0 -}}
{{- range uniq $g.topics -}}
{{- $b := $g.ringBytes -}}
{{- if hasKey $g.topicRingBytes . -}}{{- $b = get $g.topicRingBytes . -}}{{- end -}}
{{- $sum = add $sum (include "ssegate.bytes" $b) -}}
{{- end -}}
{{- $sum -}}
{{- end -}}
{{- end -}}

{{/*
ssegate.memoryLimit: the gateway container's memory limit in bytes: the one in resources, else derived so
that GOMEMLIMIT (goMemLimitPercent of it) covers the rings, the connections and the base, rounded up to a MiB.
*/}}
{{- define "ssegate.memoryLimit" -}}
{{- $g := .Values.gateway -}}
{{- $given := dig "limits" "memory" "" (default dict $g.resources) -}}
{{- if $given -}}
{{- include "ssegate.bytes" $given -}}
{{- else -}}
{{- $m := $g.memory -}}
{{- $need := add (include "ssegate.ringMemory" .) (mul $m.connections $m.connectionKiB 1024) (mul $m.baseMiB 1048576) -}}
{{- $limit := div (add (mul $need 100) (sub $m.goMemLimitPercent 1)) $m.goMemLimitPercent -}}
{{- mul (div (add $limit 1048575) 1048576) 1048576 -}}
{{- end -}}
{{- end -}}

{{/*
ssegate.goMemLimit: GOMEMLIMIT of the gateway, in bytes: goMemLimitPercent of its memory limit.
*/}}
{{- define "ssegate.goMemLimit" -}}
{{- div (mul (include "ssegate.memoryLimit" .) .Values.gateway.memory.goMemLimitPercent) 100 -}}
{{- end -}}

{{/*
ssegate.gatewayResources: the gateway's resources, with the memory limit derived when none is given, and the
memory request the limit when none is given.
*/}}
{{- define "ssegate.gatewayResources" -}}
{{- $r := deepCopy (default dict .Values.gateway.resources) -}}
{{- $limits := default dict $r.limits -}}
{{- if not $limits.memory -}}
{{- $_ := set $limits "memory" (printf "%dMi" (div (include "ssegate.memoryLimit" .) 1048576)) -}}
{{- end -}}
{{- $_ := set $r "limits" $limits -}}
{{- $requests := default dict $r.requests -}}
{{- if not $requests.memory -}}
{{- $_ := set $requests "memory" $limits.memory -}}
{{- end -}}
{{- $_ := set $r "requests" $requests -}}
{{- toYaml $r -}}
{{- end -}}
