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
ssegate.indexMemory: bytes the topics' key indexes (topicSnapshotIndex) may hold together.
*/}}
{{- define "ssegate.indexMemory" -}}
{{- $sum := 0 -}}
{{- range $topic, $size := .Values.gateway.topicSnapshotIndex -}}
{{- $sum = add $sum (include "ssegate.bytes" $size) -}}
{{- end -}}
{{- $sum -}}
{{- end -}}

{{/*
ssegate.boundedMemory: bytes the gateway's own bounded holds take besides the settings above, fixed in its
code: the filter caches (compiled filter programs 32MiB, decoded values 32MiB, by estimate), the
from=snapshot streams built at once (2, each up to 3 x 16MiB: its held frames, and the buffer they go out
through) and what the conflated streams hold together (32MiB). The chart tests check these against the code.
*/}}
{{- define "ssegate.boundedMemory" -}}
{{- add (mul 64 1048576) (mul 2 3 16 1048576) (mul 32 1048576) -}}
{{- end -}}

{{/*
ssegate.memoryLimit: the gateway container's memory limit in bytes: the one in resources, else derived so
that GOMEMLIMIT (goMemLimitPercent of it) covers the rings, the key indexes (topicSnapshotIndex), the replay block cache (replayCacheBytes, which
also sets the gateway's replay-cache-bytes), the unfinished writes to slow clients (pendingWriteBytes, the
gateway's pending-write-bytes), the published records Kafka has not acknowledged yet (publish.pendingBytes, the
gateway's publish-pending-bytes, 16MiB when empty; only with publish.topics), the gateway's bounded holds
(ssegate.boundedMemory: filter caches, snapshots being built, conflated streams), the connections and the base,
rounded up to a MiB. A connection costs connectionKiB, or unpooledConnectionKiB when the pods speak TLS or h2c:
TLS connections and HTTP/2 streams are served by a goroutine each, outside the writer pool that makes a plain
HTTP/1.1 connection cheap. WebSocket streams are too, on any port: websocketPercent of the connections cost
unpooledConnectionKiB, and websocketCompressionKiB more each with websocket.compression (a compressor of their
own). Publish request bodies being read and, without Redis, the idempotency keys a pod remembers are not
counted (docs/kubernetes.md).
*/}}
{{- define "ssegate.memoryLimit" -}}
{{- $g := .Values.gateway -}}
{{- $given := dig "limits" "memory" "" (default dict $g.resources) -}}
{{- if $given -}}
{{- include "ssegate.bytes" $given -}}
{{- else -}}
{{- $m := $g.memory -}}
{{- $connKiB := $m.connectionKiB -}}
{{- if or $g.tls.secretName $g.h2c }}{{ $connKiB = $m.unpooledConnectionKiB }}{{ end -}}
{{- $wsPct := int $m.websocketPercent -}}
{{- if or (lt $wsPct 0) (gt $wsPct 100) }}{{ fail "gateway.memory.websocketPercent must be from 0 to 100" }}{{ end -}}
{{- $ws := div (mul $m.connections $wsPct) 100 -}}
{{- $wsKiB := $m.unpooledConnectionKiB -}}
{{- if $g.websocket.compression }}{{ $wsKiB = add $wsKiB $m.websocketCompressionKiB }}{{ end -}}
{{- $connBytes := mul (add (mul (sub $m.connections $ws) $connKiB) (mul $ws $wsKiB)) 1024 -}}
{{- $publish := 0 -}}
{{- if $g.publish.topics }}{{ $publish = include "ssegate.bytes" (default "16MiB" $g.publish.pendingBytes) }}{{ end -}}
{{- $need := add (include "ssegate.ringMemory" .) (include "ssegate.indexMemory" .) (include "ssegate.bytes" $g.replayCacheBytes) (include "ssegate.bytes" $g.pendingWriteBytes) $publish (include "ssegate.boundedMemory" .) $connBytes (mul $m.baseMiB 1048576) -}}
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
