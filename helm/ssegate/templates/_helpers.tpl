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
