{{/*
Chart name, truncated to 63 characters (DNS label).
*/}}
{{- define "rmq-namesrv.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name: <release>-<chart>, or <release> when it already contains the chart name. At most 53 characters
(Helm's own release-name limit), so "-auth" and "-test" suffixes stay within 63; the Redis and CronJob
names have their own helpers below because those kinds have tighter limits.
*/}}
{{- define "rmq-namesrv.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 53 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 53 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 53 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
In-chart Redis: StatefulSet names must stay within 52 characters (the controller-revision-hash label adds 11).
*/}}
{{- define "rmq-namesrv.redis.fullname" -}}
{{- printf "%s-redis" (include "rmq-namesrv.fullname" . | trunc 46 | trimSuffix "-") }}
{{- end }}

{{/*
CronJob names must stay within 52 characters (the Job controller appends 11).
*/}}
{{- define "rmq-namesrv.skewReport.fullname" -}}
{{- printf "%s-skew-report" (include "rmq-namesrv.fullname" . | trunc 40 | trimSuffix "-") }}
{{- end }}

{{- define "rmq-namesrv.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Common labels. Callers add app.kubernetes.io/component.
*/}}
{{- define "rmq-namesrv.labels" -}}
helm.sh/chart: {{ include "rmq-namesrv.chart" . }}
app.kubernetes.io/name: {{ include "rmq-namesrv.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: rmq-namesrv
{{- end }}

{{/*
Selector labels of the workers (component "worker": never matches the Redis or job pods).
*/}}
{{- define "rmq-namesrv.selectorLabels" -}}
app.kubernetes.io/name: {{ include "rmq-namesrv.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: worker
{{- end }}

{{- define "rmq-namesrv.redis.selectorLabels" -}}
app.kubernetes.io/name: {{ include "rmq-namesrv.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: redis
{{- end }}

{{- define "rmq-namesrv.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "rmq-namesrv.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "rmq-namesrv.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "rmq-namesrv.skewImage" -}}
{{- printf "%s:%s" .Values.skew.image.repository (default .Chart.AppVersion .Values.skew.image.tag) }}
{{- end }}

{{/*
Name of the Secret holding the tokens (chart-made or existing). Empty when auth is off.
*/}}
{{- define "rmq-namesrv.authSecretName" -}}
{{- if .Values.auth.enabled }}
{{- default (printf "%s-auth" (include "rmq-namesrv.fullname" .)) .Values.auth.existingSecret }}
{{- end }}
{{- end }}

{{/*
The chart renders the Redis password Secret when no existing one is named and a password is needed:
in-chart Redis with auth, or an external Redis with `redis.password`.
*/}}
{{- define "rmq-namesrv.redis.renderSecret" -}}
{{- if and (not .Values.redis.existingSecret) (or (and .Values.redis.enabled .Values.redis.auth.enabled) (and (not .Values.redis.enabled) .Values.redis.password)) -}}
true
{{- end }}
{{- end }}

{{/*
Name of the Secret holding the Redis password, and its key. Empty name: no password.
*/}}
{{- define "rmq-namesrv.redis.secretName" -}}
{{- if .Values.redis.existingSecret }}
{{- .Values.redis.existingSecret }}
{{- else if include "rmq-namesrv.redis.renderSecret" . }}
{{- include "rmq-namesrv.redis.fullname" . }}
{{- end }}
{{- end }}

{{- define "rmq-namesrv.redis.secretKey" -}}
{{- if .Values.redis.existingSecret }}
{{- .Values.redis.existingSecretPasswordKey }}
{{- else -}}
redis-password
{{- end }}
{{- end }}

{{/*
How the workers reach Redis: single (the in-chart Redis, or redis.url), sentinel or cluster (external only).
*/}}
{{- define "rmq-namesrv.redisMode" -}}
{{- if .Values.redis.enabled }}
{{- if ne (.Values.redis.mode | default "single") "single" }}
{{- fail "redis.mode sentinel/cluster needs redis.enabled=false (the in-chart Redis is a single server)" }}
{{- end -}}
single
{{- else -}}
{{ .Values.redis.mode | default "single" }}
{{- end }}
{{- end }}

{{/*
NAMESRV_REDIS_URL: the in-chart Redis Service, or redis.url (a seed node in cluster mode); empty in sentinel
mode. Refuses to render without a way to Redis: no URL and no sentinels would put every worker in embedded mode
(its own private in-process store), which is wrong with replicas.
*/}}
{{- define "rmq-namesrv.redisUrl" -}}
{{- $mode := include "rmq-namesrv.redisMode" . }}
{{- if .Values.redis.enabled }}
{{- printf "redis://%s.%s.svc:6379/0" (include "rmq-namesrv.redis.fullname" .) .Release.Namespace }}
{{- else if eq $mode "sentinel" }}
{{- if not .Values.redis.sentinel.addresses }}
{{- fail "redis.sentinel.addresses is required when redis.mode=sentinel" }}
{{- end }}
{{- if .Values.redis.url }}
{{- fail "redis.url must be empty when redis.mode=sentinel (the sentinels name the primary)" }}
{{- end }}
{{- else if .Values.redis.url }}
{{- .Values.redis.url }}
{{- else }}
{{- fail "redis.url is required when redis.enabled=false (point it at your managed Redis)" }}
{{- end }}
{{- end }}

{{/*
ConfigMap entries of the Redis deployment mode (NAMESRV_REDIS_URL, or the sentinels, and the cluster switch).
*/}}
{{- define "rmq-namesrv.redisModeConfig" -}}
{{- $mode := include "rmq-namesrv.redisMode" . }}
{{- with include "rmq-namesrv.redisUrl" . }}
NAMESRV_REDIS_URL: {{ . | quote }}
{{- end }}
{{- if eq $mode "sentinel" }}
NAMESRV_REDIS_SENTINELS: {{ join "," .Values.redis.sentinel.addresses | quote }}
NAMESRV_REDIS_MASTER_NAME: {{ .Values.redis.sentinel.masterName | quote }}
{{- if .Values.redis.sentinel.tls.enabled }}
NAMESRV_REDIS_SENTINEL_TLS: "true"
{{- $dir := include "rmq-namesrv.redisTlsDir" . }}
{{- if .Values.redis.sentinel.tls.caSecret }}
NAMESRV_REDIS_TLS_CA_FILE: {{ printf "%s/%s" $dir .Values.redis.sentinel.tls.caSecretKey | quote }}
{{- end }}
{{- if .Values.redis.sentinel.tls.clientSecret }}
NAMESRV_REDIS_TLS_CERT_FILE: {{ printf "%s/tls.crt" $dir | quote }}
NAMESRV_REDIS_TLS_KEY_FILE: {{ printf "%s/tls.key" $dir | quote }}
{{- end }}
{{- end }}
{{- else if eq $mode "cluster" }}
NAMESRV_REDIS_CLUSTER: "true"
{{- with .Values.redis.cluster.seeds }}
NAMESRV_REDIS_CLUSTER_NODES: {{ join "," . | quote }}
{{- end }}
{{- end }}
{{- end }}

{{/*
NAMESRV_REDIS_PASSWORD env entry (empty when Redis has no password).
*/}}
{{- define "rmq-namesrv.redisPasswordEnv" -}}
{{- $name := include "rmq-namesrv.redis.secretName" . }}
{{- if $name }}
- name: NAMESRV_REDIS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $name }}
      key: {{ include "rmq-namesrv.redis.secretKey" . }}
{{- end }}
{{- if and (eq (include "rmq-namesrv.redisMode" .) "sentinel") .Values.redis.sentinel.existingSecret }}
- name: NAMESRV_REDIS_SENTINEL_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ .Values.redis.sentinel.existingSecret }}
      key: {{ .Values.redis.sentinel.existingSecretPasswordKey }}
{{- end }}
{{- end }}

{{/*
The address each worker announces for GET /rocketmq/nsaddr, unless config.announceAddr names one: the pod's own IP
(downward API) at the native port; in brackets when the workers bind IPv6 (config.host "::").
*/}}
{{- define "rmq-namesrv.announceEnv" -}}
{{- if not .Values.config.announceAddr }}
- name: POD_IP
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
- name: NAMESRV_ANNOUNCE_ADDR
  value: {{ if contains ":" (toString .Values.config.host) }}"[$(POD_IP)]:{{ .Values.remotingPort }}"{{ else }}"$(POD_IP):{{ .Values.remotingPort }}"{{ end }}
{{- end }}
{{- end }}

{{/*
Cross-field checks the JSON schema cannot express.
*/}}
{{- define "rmq-namesrv.validate" -}}
{{- /* 20 = the application's default drain_grace_s, used when config.drainGraceS is removed (null). */}}
{{- $drain := 20.0 }}
{{- if hasKey .Values.config "drainGraceS" }}
{{- $drain = float64 .Values.config.drainGraceS }}
{{- end }}
{{- $budget := sub (int .Values.terminationGracePeriodSeconds) (int .Values.preStopSleepSeconds) }}
{{- if le (float64 $budget) $drain }}
{{- fail (printf "terminationGracePeriodSeconds (%v) must exceed preStopSleepSeconds (%v) + config.drainGraceS (%v)" .Values.terminationGracePeriodSeconds .Values.preStopSleepSeconds .Values.config.drainGraceS) }}
{{- end }}
{{- if and .Values.autoscaling.enabled (lt (int .Values.autoscaling.maxReplicas) (int .Values.autoscaling.minReplicas)) }}
{{- fail "autoscaling.maxReplicas must be >= autoscaling.minReplicas" }}
{{- end }}
{{- end }}

{{/*
Worker pods: replicaCount, or the deprecated `replicas` when a user still sets it.
*/}}
{{- define "rmq-namesrv.replicaCount" -}}
{{- if hasKey .Values "replicas" }}{{ .Values.replicas }}{{ else }}{{ .Values.replicaCount }}{{ end }}
{{- end }}

{{/*
Sentinel mode's TLS files: where they are mounted, the volume (redis.sentinel.tls.caSecret and clientSecret
projected into one directory) and its mount; empty unless sentinel mode with TLS and one of the Secrets.
*/}}
{{- define "rmq-namesrv.redisTlsDir" -}}
/etc/rmq-namesrv/redis-tls
{{- end }}

{{- define "rmq-namesrv.redisTlsOn" -}}
{{- $tls := .Values.redis.sentinel.tls }}
{{- if and (eq (include "rmq-namesrv.redisMode" .) "sentinel") $tls.enabled (or $tls.caSecret $tls.clientSecret) -}}
true
{{- end }}
{{- end }}

{{- define "rmq-namesrv.redisTlsVolume" -}}
{{- if include "rmq-namesrv.redisTlsOn" . }}
{{- $tls := .Values.redis.sentinel.tls }}
- name: redis-tls
  projected:
    sources:
      {{- if $tls.caSecret }}
      - secret:
          name: {{ $tls.caSecret }}
          items:
            - key: {{ $tls.caSecretKey }}
              path: {{ $tls.caSecretKey }}
      {{- end }}
      {{- if $tls.clientSecret }}
      - secret:
          name: {{ $tls.clientSecret }}
          items:
            - key: tls.crt
              path: tls.crt
            - key: tls.key
              path: tls.key
      {{- end }}
{{- end }}
{{- end }}

{{- define "rmq-namesrv.redisTlsVolumeMount" -}}
{{- if include "rmq-namesrv.redisTlsOn" . }}
- name: redis-tls
  mountPath: {{ include "rmq-namesrv.redisTlsDir" . }}
  readOnly: true
{{- end }}
{{- end }}
