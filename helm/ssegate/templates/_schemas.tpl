{{/*
How values and keys are written into frames, and where the schemas of the schema formats (avro, protobuf,
json-schema) come from: a schema registry, or schema files in a ConfigMap. Only the settings the values set
are written (the rest keep the gateway's defaults). What the gateway refuses at start is refused here, before
install: an unknown format, a topic that is not served, a schema format without a source of schemas, a
registry and files together. The registry's password, token, CA and client certificate come from Secrets
mounted as folders (never subPath, whose files never update), never from values in clear text.
*/}}
{{- define "ssegate.valuesConfig" -}}
{{- $g := .Values.gateway -}}
{{- $r := $g.schemaRegistry -}}
{{- $formats := list "auto" "base64" "text" "avro" "protobuf" "json-schema" -}}
{{- $schemaFormats := list "avro" "protobuf" "json-schema" -}}
{{- range $name := list "valueFormat" "keyFormat" }}
{{- with get $g $name }}
{{- if not (has . $formats) }}
{{- fail (printf "gateway.%s is %q: want one of %s" $name . (join ", " $formats)) }}
{{- end }}
{{- end }}
{{- end }}
{{- range $name := list "topicValueFormats" "topicKeyFormats" }}
{{- range $topic, $format := get $g $name }}
{{- if not (has $topic $g.topics) }}
{{- fail (printf "gateway.%s names %q, which is not one of gateway.topics (%s)" $name $topic (join ", " $g.topics)) }}
{{- end }}
{{- if not (has $format $formats) }}
{{- fail (printf "gateway.%s.%s is %q: want one of %s" $name $topic $format (join ", " $formats)) }}
{{- end }}
{{- end }}
{{- end }}
{{- if and $g.schemaFiles $g.schemaFilesConfigMap }}
{{- fail "gateway.schemaFiles and gateway.schemaFilesConfigMap are set together: the schema files come from the chart's ConfigMap or from yours; set one of them" }}
{{- end }}
{{- $files := or $g.schemaFiles $g.schemaFilesConfigMap }}
{{- if and $r.url $files }}
{{- fail "gateway.schemaRegistry.url and gateway.schemaFiles (or schemaFilesConfigMap) are set together: the gateway takes its schemas from a registry or from files, not both; set one of them" }}
{{- end }}
{{- $schemaTopic := "" }}
{{- range $topic := $g.topics }}
{{- $value := default $g.valueFormat (get $g.topicValueFormats $topic) }}
{{- $key := default $g.keyFormat (get $g.topicKeyFormats $topic) }}
{{- if or (has $value $schemaFormats) (has $key $schemaFormats) }}{{ $schemaTopic = $topic }}{{ end }}
{{- end }}
{{- if and $schemaTopic (not $r.url) (not $files) }}
{{- fail (printf "topic %s has a schema format (avro, protobuf or json-schema): set gateway.schemaRegistry.url or gateway.schemaFiles (or schemaFilesConfigMap)" $schemaTopic) }}
{{- end }}
{{- with $g.valueFormat }}
value-format: {{ . | quote }}
{{- end }}
{{- with $g.topicValueFormats }}
topic-value-format: {{ toJson . }}
{{- end }}
{{- with $g.keyFormat }}
key-format: {{ . | quote }}
{{- end }}
{{- with $g.topicKeyFormats }}
topic-key-format: {{ toJson . }}
{{- end }}
{{- if $r.url }}
{{- range splitList "," $r.url }}
{{- if not (regexMatch "^https?://[^/]+" (trim .)) }}
{{- fail (printf "gateway.schemaRegistry.url: %q is not an http or https URL" (trim .)) }}
{{- end }}
{{- end }}
{{- if and $r.username $r.tokenSecret.name }}
{{- fail "gateway.schemaRegistry.username and gateway.schemaRegistry.tokenSecret.name are set together: basic or bearer authentication, not both" }}
{{- end }}
{{- if and $r.passwordSecret.name (not $r.username) }}
{{- fail "gateway.schemaRegistry.username is required with gateway.schemaRegistry.passwordSecret (Confluent Cloud: the API key)" }}
{{- end }}
schema-registry-url: {{ $r.url | quote }}
{{- with $r.username }}
schema-registry-username: {{ . | quote }}
{{- $_ := required "gateway.schemaRegistry.passwordSecret.name is required with gateway.schemaRegistry.username" $r.passwordSecret.name }}
schema-registry-password-file: /etc/ssegate/schema-registry-auth/password
{{- end }}
{{- if $r.tokenSecret.name }}
schema-registry-token-file: /etc/ssegate/schema-registry-auth/token
{{- end }}
{{- if $r.tls.caSecret }}
schema-registry-ca-file: /etc/ssegate/schema-registry-ca/ca.crt
{{- end }}
{{- if $r.tls.clientCertSecret }}
schema-registry-cert-file: /etc/ssegate/schema-registry-client/tls.crt
schema-registry-key-file: /etc/ssegate/schema-registry-client/tls.key
{{- end }}
{{- with $r.timeout }}
schema-registry-timeout: {{ . | quote }}
{{- end }}
{{- else if or $r.username $r.passwordSecret.name $r.tokenSecret.name $r.tls.caSecret $r.tls.clientCertSecret $r.timeout }}
{{- fail "gateway.schemaRegistry.url is required with the registry's other values (username, passwordSecret, tokenSecret, tls, timeout)" }}
{{- end }}
{{- if $files }}
schema-files: /etc/ssegate/schemas/
{{- end }}
{{- if not $g.validateJSON }}
json-schema-validate: false
{{- end }}
{{- end -}}

{{- define "ssegate.schemaVolumeMounts" -}}
{{- $g := .Values.gateway -}}
{{- $r := $g.schemaRegistry -}}
{{- if $r.url }}
{{- if or $r.username $r.tokenSecret.name }}
- {name: schema-registry-auth, mountPath: /etc/ssegate/schema-registry-auth, readOnly: true}
{{- end }}
{{- if $r.tls.caSecret }}
- {name: schema-registry-ca, mountPath: /etc/ssegate/schema-registry-ca, readOnly: true}
{{- end }}
{{- if $r.tls.clientCertSecret }}
- {name: schema-registry-client, mountPath: /etc/ssegate/schema-registry-client, readOnly: true}
{{- end }}
{{- end }}
{{- if or $g.schemaFiles $g.schemaFilesConfigMap }}
- {name: schemas, mountPath: /etc/ssegate/schemas, readOnly: true}
{{- end }}
{{- end -}}

{{- define "ssegate.schemaVolumes" -}}
{{- $g := .Values.gateway -}}
{{- $r := $g.schemaRegistry -}}
{{- if $r.url }}
{{- if $r.username }}
- name: schema-registry-auth
  secret:
    secretName: {{ $r.passwordSecret.name | quote }}
    items:
      - {key: {{ $r.passwordSecret.key | quote }}, path: password}
{{- else if $r.tokenSecret.name }}
- name: schema-registry-auth
  secret:
    secretName: {{ $r.tokenSecret.name | quote }}
    items:
      - {key: {{ $r.tokenSecret.key | quote }}, path: token}
{{- end }}
{{- if $r.tls.caSecret }}
- name: schema-registry-ca
  secret: {secretName: {{ $r.tls.caSecret | quote }}}
{{- end }}
{{- if $r.tls.clientCertSecret }}
- name: schema-registry-client
  secret: {secretName: {{ $r.tls.clientCertSecret | quote }}}
{{- end }}
{{- end }}
{{- if $g.schemaFiles }}
- name: schemas
  configMap: {name: {{ include "ssegate.fullname" . }}-schemas}
{{- else if $g.schemaFilesConfigMap }}
- name: schemas
  configMap: {name: {{ $g.schemaFilesConfigMap | quote }}}
{{- end }}
{{- end -}}
