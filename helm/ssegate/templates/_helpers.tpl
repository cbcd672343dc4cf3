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

{{/*
The startup probe's failureThreshold: probes.startupSeconds over probes.startupPeriodSeconds, rounded up. The
probe asks /healthz, so the budget is the process's start alone (configuration, key files, ports); waiting for
Kafka, a topic or the prefill is readiness's, which has no deadline.
*/}}
{{- define "ssegate.startupFailureThreshold" -}}
{{- $p := .Values.gateway.probes -}}
{{- max 1 (div (add $p.startupSeconds $p.startupPeriodSeconds -1) $p.startupPeriodSeconds) -}}
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
{{- with .Values.kafka.clientRack }}
kafka-client-rack: {{ . | quote }}
{{- end }}
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
{{- if and (eq (upper .) "PLAIN") (not $.Values.kafka.tls.enabled) (not $.Values.kafka.sasl.allowPlaintext) }}
{{- fail "kafka.sasl.mechanism PLAIN without kafka.tls.enabled sends the password in clear: enable TLS, or set kafka.sasl.allowPlaintext" }}
{{- end }}
kafka-sasl-mechanism: {{ . | quote }}
{{- if eq (upper .) "OAUTHBEARER" }}
{{- with $.Values.kafka.sasl.oauth }}
kafka-sasl-oauth-token-url: {{ required "kafka.sasl.oauth.tokenUrl is required with OAUTHBEARER" .tokenUrl | quote }}
kafka-sasl-oauth-client-id: {{ required "kafka.sasl.oauth.clientId is required with OAUTHBEARER" .clientId | quote }}
kafka-sasl-oauth-client-secret-file: /etc/ssegate/kafka-sasl/{{ include "ssegate.saslSecretFile" $ }}
{{- with .scope }}
kafka-sasl-oauth-scope: {{ . | quote }}
{{- end }}
{{- with .audience }}
kafka-sasl-oauth-audience: {{ . | quote }}
{{- end }}
{{- with .extensions }}
kafka-sasl-oauth-extensions: {{ toJson . }}
{{- end }}
{{- end }}
{{- else if include "ssegate.saslSecretFile" $ }}
kafka-sasl-username: {{ $.Values.kafka.sasl.username | quote }}
kafka-sasl-password-file: /etc/ssegate/kafka-sasl/{{ include "ssegate.saslSecretFile" $ }}
{{- end }}
{{- if $.Values.kafka.sasl.allowPlaintext }}
kafka-sasl-allow-plaintext: true
{{- end }}
{{- end }}
{{- end -}}

{{/*
The file the SASL mechanism reads its secret from, in the kafka-sasl volume: "password" (PLAIN and SCRAM),
"client-secret" (OAUTHBEARER), or nothing (no SASL, or AWS_MSK_IAM, whose credentials come from the pod's
AWS environment).
*/}}
{{- define "ssegate.saslSecretFile" -}}
{{- with .Values.kafka.sasl.mechanism }}
{{- if eq (upper .) "OAUTHBEARER" }}client-secret{{ else if ne (upper .) "AWS_MSK_IAM" }}password{{ end }}
{{- end }}
{{- end -}}

{{- define "ssegate.kafkaVolumeMounts" -}}
{{- if and .Values.kafka.tls.enabled .Values.kafka.tls.caSecret }}
- {name: kafka-ca, mountPath: /etc/ssegate/kafka-ca, readOnly: true}
{{- end }}
{{- if and .Values.kafka.tls.enabled .Values.kafka.tls.clientCertSecret }}
- {name: kafka-client, mountPath: /etc/ssegate/kafka-client, readOnly: true}
{{- end }}
{{- if include "ssegate.saslSecretFile" . }}
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
{{- $file := include "ssegate.saslSecretFile" . }}
{{- with .Values.kafka.sasl }}
{{- if eq $file "client-secret" }}
- name: kafka-sasl
  secret:
    secretName: {{ required "kafka.sasl.oauth.clientSecretSecret.name is required with OAUTHBEARER" .oauth.clientSecretSecret.name | quote }}
    items:
      - {key: {{ .oauth.clientSecretSecret.key | quote }}, path: client-secret}
{{- else if eq $file "password" }}
- name: kafka-sasl
  secret:
    secretName: {{ required "kafka.sasl.passwordSecret.name is required with SASL" .passwordSecret.name | quote }}
    items:
      - {key: {{ .passwordSecret.key | quote }}, path: password}
{{- end }}
{{- end }}
{{- end -}}

{{/*
Who may read what: the gateway's auth and CORS settings, only those the values set (the rest keep the
gateway's defaults). The keys come from a Secret mounted as a folder, so that a rotated Secret reaches the
gateway without a restart (it reads its key files again every auth-key-refresh).
*/}}
{{- define "ssegate.authConfig" -}}
{{- $a := .Values.gateway.auth -}}
{{- with $a.mode }}
auth: {{ . | quote }}
{{- end }}
{{- with $a.topicModes }}
topic-auth: {{ toJson . }}
{{- end }}
{{- with $a.algorithms }}
auth-algorithms: {{ toJson . }}
{{- end }}
{{- if $a.keySecret.name }}
{{- $file := printf "/etc/ssegate/auth/%s" (required "gateway.auth.keySecret.key is required with a key Secret" $a.keySecret.key) }}
{{- if eq $a.keySecret.format "pem" }}
auth-key-file: {{ $file | quote }}
{{- else if eq $a.keySecret.format "hmac" }}
auth-hmac-secret-file: {{ $file | quote }}
{{- else if eq $a.keySecret.format "jwks" }}
auth-jwks-file: {{ $file | quote }}
{{- else }}
{{- fail "gateway.auth.keySecret.format must be pem, hmac or jwks" }}
{{- end }}
{{- end }}
{{- with $a.jwksUrl }}
auth-jwks-url: {{ . | quote }}
{{- end }}
{{- with $a.issuer }}
auth-issuer: {{ . | quote }}
{{- end }}
{{- with $a.audience }}
auth-audience: {{ toJson . }}
{{- end }}
{{- with $a.leeway }}
auth-leeway: {{ . | quote }}
{{- end }}
{{- with $a.keyRefresh }}
auth-key-refresh: {{ . | quote }}
{{- end }}
{{- with $a.claim }}
auth-claim: {{ . | quote }}
{{- end }}
{{- with $a.cookie }}
auth-cookie: {{ . | quote }}
{{- end }}
{{- if $a.queryToken }}
auth-query-token: true
{{- end }}
{{- with $a.expiryNotice }}
auth-expiry-notice: {{ . | quote }}
{{- end }}
{{- with $a.hook.url }}
auth-url: {{ . | quote }}
{{- end }}
{{- with $a.hook.topicUrls }}
topic-auth-url: {{ toJson . }}
{{- end }}
{{- with $a.hook.timeout }}
auth-hook-timeout: {{ . | quote }}
{{- end }}
{{- with $a.hook.ttl }}
auth-hook-ttl: {{ . | quote }}
{{- end }}
{{- with $a.hook.cacheEntries }}
auth-hook-cache-entries: {{ . }}
{{- end }}
{{- with .Values.gateway.cors.origins }}
cors-origins: {{ toJson . }}
{{- end }}
{{- if .Values.gateway.cors.credentials }}
cors-credentials: true
{{- end }}
{{- end -}}

{{/*
The Host headers the stream port answers (allowed-hosts), against DNS rebinding: the names of the client and
headless Services (short, with the namespace, .svc and the cluster domain) and of the pods under the headless
Service, the Ingress hosts, the HTTPRoute hostnames, localhost (port-forwards), IP addresses (pod and cluster
IPs: kube-proxy, port-forwards, the helm test; a rebound page never sends one) and the extra hosts. The admin
port, which the probes use, is not checked.
*/}}
{{- define "ssegate.allowedHosts" -}}
{{- $h := .Values.gateway.hostCheck -}}
{{- if $h.enabled }}
{{- $ns := .Release.Namespace }}
{{- $svc := printf "%s-gateway" (include "ssegate.fullname" .) }}
{{- $headless := printf "%s-gateway-headless" (include "ssegate.fullname" .) }}
{{- $hosts := list }}
{{- range list $svc $headless (printf "*.%s" $headless) }}
{{- if not (hasPrefix "*" .) }}{{ $hosts = append $hosts . }}{{ end }}
{{- $hosts = concat $hosts (list (printf "%s.%s" . $ns) (printf "%s.%s.svc" . $ns) (printf "%s.%s.svc.%s" . $ns $h.clusterDomain)) }}
{{- end }}
{{- $hosts = append $hosts "localhost" }}
{{- if .Values.gateway.ingress.enabled }}{{ $hosts = concat $hosts .Values.gateway.ingress.hosts }}{{ end }}
{{- if .Values.gateway.httpRoute.enabled }}{{ $hosts = concat $hosts .Values.gateway.httpRoute.hostnames }}{{ end }}
{{- if $h.allowIPs }}{{ $hosts = concat $hosts (list "0.0.0.0/0" "::/0") }}{{ end }}
{{- $hosts = concat $hosts $h.extraHosts }}
allowed-hosts: {{ toJson (uniq $hosts) }}
{{- end }}
{{- end -}}

{{/* The Redis address of the release: yours, or the bundled one's Service. */}}
{{- define "ssegate.redisAddr" -}}
{{- if .Values.redis.bundled }}{{ printf "%s-redis:6379" (include "ssegate.fullname" .) }}{{ else }}{{ .Values.redis.addr }}{{ end }}
{{- end -}}

{{/* Redis connection settings (for the limits' counts and ingest's leases), and their Secret's volume. */}}
{{- define "ssegate.redisConfig" -}}
redis-addr: {{ required "redis.addr (or redis.bundled) is required" (include "ssegate.redisAddr" .) | quote }}
{{- with .Values.redis.username }}
redis-username: {{ . | quote }}
{{- end }}
{{- if .Values.redis.passwordSecret.name }}
redis-password-file: /etc/ssegate/redis/password
{{- end }}
{{- with .Values.redis.db }}
redis-db: {{ . }}
{{- end }}
{{- end -}}

{{- define "ssegate.redisVolumeMounts" -}}
{{- if .Values.redis.passwordSecret.name }}
- {name: redis-password, mountPath: /etc/ssegate/redis, readOnly: true}
{{- end }}
{{- end -}}

{{- define "ssegate.redisVolumes" -}}
{{- if .Values.redis.passwordSecret.name }}
- name: redis-password
  secret:
    secretName: {{ .Values.redis.passwordSecret.name | quote }}
    items:
      - {key: {{ .Values.redis.passwordSecret.key | quote }}, path: password}
{{- end }}
{{- end -}}

{{/* The limits on streams; counted cluster-wide in Redis when a limit per address or subject is set. */}}
{{- define "ssegate.limitsConfig" -}}
{{- $l := .Values.gateway.limits -}}
{{- with $l.maxStreams }}
max-streams: {{ . }}
{{- end }}
{{- with $l.streamRate }}
stream-rate: {{ . }}
{{- end }}
{{- with $l.streamBurst }}
stream-burst: {{ . }}
{{- end }}
{{- with $l.maxStreamsPerIP }}
max-streams-per-ip: {{ . }}
{{- end }}
{{- with $l.maxStreamsPerSubject }}
max-streams-per-subject: {{ . }}
{{- end }}
{{- with $l.maxTopicsPerStream }}
max-topics-per-stream: {{ . }}
{{- end }}
{{- with $l.trustedProxies }}
trusted-proxies: {{ toJson . }}
{{- end }}
{{- if include "ssegate.gatewayRedis" . }}
{{ include "ssegate.redisConfig" . }}
{{- end }}
{{- if include "ssegate.sharedLimits" . }}
quota-failure: {{ $l.quotaFailure | quote }}
{{- with $l.quotaExpiry }}
quota-expiry: {{ . | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "ssegate.sharedLimits" -}}
{{- if or .Values.gateway.limits.maxStreamsPerIP .Values.gateway.limits.maxStreamsPerSubject }}true{{ end }}
{{- end -}}

{{/*
Whether the gateway is given the release's Redis (redis-addr): for the limits per address and subject, which
need it (redis.addr or redis.bundled is then required), and for publishing's idempotency keys whenever a Redis
is configured, so that a retry on another pod, or after a restart, is still caught. Publishing without a Redis
keeps each pod's keys in its own memory (NOTES.txt says so).
*/}}
{{- define "ssegate.gatewayRedis" -}}
{{- if or (include "ssegate.sharedLimits" .) (and .Values.gateway.publish.topics (include "ssegate.redisAddr" .)) }}true{{ end }}
{{- end -}}

{{/*
Publishing (POST /topics/{topic}/records, publish=1 on WebSockets): the gateway's publish-* settings, only those
the values set, and none while no topic is open (publishing is off). A topic open for publishing must be a served one: refused here, before install, as the gateway
refuses it at start.
*/}}
{{- define "ssegate.publishConfig" -}}
{{- $p := .Values.gateway.publish -}}
{{- range $p.topics }}
{{- if not (has . $.Values.gateway.topics) }}
{{- fail (printf "gateway.publish.topics names %q, which is not one of gateway.topics (%s): only served topics can be opened for publishing (the answer's id is a position of the topic's stream)" . (join ", " $.Values.gateway.topics)) }}
{{- end }}
{{- end }}
{{- range $name := list "rate" "burst" "maxRecords" "maxBodyReads" }}
{{- if lt (int (get $p $name)) 0 }}
{{- fail (printf "gateway.publish.%s must be zero (the gateway's default) or positive" $name) }}
{{- end }}
{{- end }}
{{- if $p.topics }}
publish-topics: {{ toJson $p.topics }}
{{- if $p.anonymous }}
publish-anonymous: true
{{- end }}
{{- with $p.maxKeyBytes }}
publish-max-key-bytes: {{ . | quote }}
{{- end }}
{{- with $p.maxValueBytes }}
publish-max-value-bytes: {{ . | quote }}
{{- end }}
{{- with $p.maxHeaderBytes }}
publish-max-header-bytes: {{ . | quote }}
{{- end }}
{{- with $p.maxRecords }}
publish-max-records: {{ . }}
{{- end }}
{{- with $p.pendingBytes }}
# Counted in the container's memory limit, when the chart derives it.
publish-pending-bytes: {{ . | quote }}
{{- end }}
{{- with $p.timeout }}
publish-timeout: {{ . | quote }}
{{- end }}
{{- with $p.idempotencyWindow }}
publish-idempotency-window: {{ . | quote }}
{{- end }}
{{- with $p.rate }}
publish-rate: {{ . }}
{{- end }}
{{- with $p.burst }}
publish-burst: {{ . }}
{{- end }}
{{- with $p.maxBodyBytes }}
publish-max-body-bytes: {{ . | quote }}
{{- end }}
{{- with $p.maxBodyReads }}
publish-max-body-reads: {{ . }}
{{- end }}
{{- with $p.bodyTimeout }}
publish-body-timeout: {{ . | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
ssegate.publishMaxBody: the largest publish request body the gateway takes, in bytes, as it bounds it
(maxBodyBytes, else 4MiB or one record at its largest, in base64 with room for the JSON, when that is more;
never more than every record at its largest, nor 64MiB): what a proxy in front must let through. The gateway's
defaults stand in for the values left empty (config_publish.go; a test compares them).
*/}}
{{- define "ssegate.publishMaxBody" -}}
{{- $p := .Values.gateway.publish -}}
{{- $key := include "ssegate.bytes" (default "4KiB" $p.maxKeyBytes) -}}
{{- $value := include "ssegate.bytes" (default "1MiB" $p.maxValueBytes) -}}
{{- $header := include "ssegate.bytes" (default "16KiB" $p.maxHeaderBytes) -}}
{{- $per := add (div (mul (add $key $value $header) 4) 3) 1024 -}}
{{- $body := max 4194304 $per -}}
{{- with $p.maxBodyBytes }}{{ $body = include "ssegate.bytes" . | int64 }}{{ end -}}
{{- min $body (mul $per (default 500 $p.maxRecords)) 67108864 -}}
{{- end -}}

{{/* WebSocket streams: the gateway's ws-* settings, only those the values set. */}}
{{- define "ssegate.websocketConfig" -}}
{{- with .Values.gateway.websocket.maxMessageBytes }}
ws-max-message-bytes: {{ . | quote }}
{{- end }}
{{- if .Values.gateway.websocket.compression }}
ws-compression: true
{{- end }}
{{- end -}}

{{- define "ssegate.authVolumeMounts" -}}
{{- if .Values.gateway.auth.keySecret.name }}
- {name: auth-keys, mountPath: /etc/ssegate/auth, readOnly: true}
{{- end }}
{{- end -}}

{{- define "ssegate.authVolumes" -}}
{{- if .Values.gateway.auth.keySecret.name }}
- name: auth-keys
  secret: {secretName: {{ .Values.gateway.auth.keySecret.name | quote }}}
{{- end }}
{{- end -}}

{{/*
TLS and HTTP/2 on the clients' port. With gateway.tls.secretName the port speaks TLS (HTTP/2 by ALPN and
HTTP/1.1); its Secret is mounted as a folder, never with subPath (whose files never update), so that a renewed
certificate reaches the running gateway, which reads the files again when they change. gateway.h2c adds
cleartext HTTP/2 with prior knowledge; the gateway refuses it with TLS, and so does the chart, before install.
*/}}
{{- define "ssegate.tlsConfig" -}}
{{- $t := .Values.gateway.tls -}}
{{- if and $t.secretName .Values.gateway.h2c }}
{{- fail "gateway.h2c and gateway.tls.secretName are set together: h2c is cleartext HTTP/2, and with TLS the pods offer HTTP/2 by ALPN already; set one of them" }}
{{- end }}
{{- if $t.secretName }}
tls-cert-file: {{ printf "/etc/ssegate/tls/%s" (required "gateway.tls.certKey is required with gateway.tls.secretName" $t.certKey) | quote }}
tls-key-file: {{ printf "/etc/ssegate/tls/%s" (required "gateway.tls.keyKey is required with gateway.tls.secretName" $t.keyKey) | quote }}
{{- end }}
{{- if .Values.gateway.h2c }}
h2c: true
{{- end }}
{{- end -}}

{{- define "ssegate.tlsVolumeMounts" -}}
{{- if .Values.gateway.tls.secretName }}
- {name: tls, mountPath: /etc/ssegate/tls, readOnly: true}
{{- end }}
{{- end -}}

{{- define "ssegate.tlsVolumes" -}}
{{- if .Values.gateway.tls.secretName }}
- name: tls
  secret: {secretName: {{ .Values.gateway.tls.secretName | quote }}}
{{- end }}
{{- end -}}

{{/* The scheme of the clients' port: https with TLS, else http. */}}
{{- define "ssegate.scheme" -}}
{{- if .Values.gateway.tls.secretName }}https{{ else }}http{{ end -}}
{{- end -}}

{{/*
The Services' clients' port: its name (https with TLS, else http; the pods' port is named http either way)
and its appProtocol, which meshes and Gateway API implementations read to pick what they speak to the pods:
https (the IANA service name) with TLS, kubernetes.io/h2c (HTTP/2 with prior knowledge) with h2c, none else.
*/}}
{{- define "ssegate.servicePortName" -}}
{{- include "ssegate.scheme" . -}}
{{- end -}}

{{- define "ssegate.appProtocol" -}}
{{- if .Values.gateway.tls.secretName }}https{{ else if .Values.gateway.h2c }}kubernetes.io/h2c{{ end -}}
{{- end -}}
