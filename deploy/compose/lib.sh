# Shared by smoke.sh and chaos.sh (sourced, not run): the compose project, the
# CLI in a one-shot container with the operator certificate and the bootstrap
# token, the checks both scripts wait for, and the ACL refusal checks. The sourcing script has done
# `set -euo pipefail` and `cd "$(dirname "$0")"`.
#
# Environment: STRATA_IMAGE (default strata:dev), STRATA_PROJECT (default
# strata-<script>-<pid>), STRATA_KEEP=1 leaves the cluster up at the end.

for c in docker curl; do
	command -v "$c" >/dev/null || { echo "FAIL: $c not found (a Docker engine with its CLI, and curl: sudo make compose-deps)" >&2; exit 1; }
done
command -v docker-compose >/dev/null || docker compose version >/dev/null 2>&1 ||
	{ echo "FAIL: neither docker-compose nor the docker compose plugin found: sudo make compose-deps" >&2; exit 1; }
project="${STRATA_PROJECT:-strata-$(basename "$0" .sh)-$$}"
image="${STRATA_IMAGE:-strata:dev}"
export STRATA_IMAGE="$image"
if command -v docker-compose >/dev/null; then compose=(docker-compose); else compose=(docker compose); fi
compose+=(-p "$project" -f docker-compose.yaml)
net="${project}_strata"
services=(global-1 global-2 global-3 eu-1-1 eu-1-2 eu-1-3 host-1 host-2 host-3)

cleanup() {
	if [ "${STRATA_KEEP:-}" = 1 ]; then
		echo "cluster left up (STRATA_KEEP=1): ${compose[*]} down -v" >&2
		return
	fi
	"${compose[@]}" down -v --remove-orphans >/dev/null 2>&1 || true
}

fail() {
	echo "FAIL: $*" >&2
	"${compose[@]}" logs --no-color --tail 30 >&2 || true
	exit 1
}

# strata ARGS...: the CLI on the compose network with the operator certificate
# and the token in STRATA_TOKEN (the bootstrap token unless the caller set
# another; empty: no token). The token goes by name (-e STRATA_TOKEN), so it
# never appears on a command line.
strata() {
	docker run --rm --network "$net" -v "$PWD/../examples:/examples:ro" -v "$PWD/tls/operator:/tls:ro" \
		-e STRATA_TLS=/tls -e STRATA_TOKEN "$image" "$@"
}

# wait_for DESC SECONDS CMD...: retry CMD every second until it succeeds.
wait_for() {
	local desc=$1 secs=$2 i; shift 2
	for ((i = 0; i < secs; i++)); do
		if "$@" >/dev/null 2>&1; then echo "ok: $desc (${i}s)"; return 0; fi
		sleep 1
	done
	fail "$desc not within ${secs}s"
}

# container SERVICE: its container ID (by the labels compose puts on it: the
# docker CLI answers in milliseconds where docker-compose v1 takes seconds).
container() {
	docker ps -aq --filter "label=com.docker.compose.project=$project" --filter "label=com.docker.compose.service=$1"
}

# ip SERVICE: its address on the compose network.
ip() { docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$(container "$1")"; }

# The checks read the whole output first (grep -q on a pipe would make the writer
# fail with pipefail).
hosts_active() { local out; out=$(strata status --addr global-1:7400) && [ "$(grep -c ' host .*active  yes' <<<"$out")" -eq 3 ]; }
all_placed() { local out; out=$(strata job list --addr global-1:7400) && grep -Eq '^wordcount +16 +16 ' <<<"$out"; }
on_hosts() { local out; out=$(strata shards --addr global-1:7400) && [ "$(grep -Ec ' eu-1 +eu-1-host-' <<<"$out")" -eq 16 ]; }
# ready SERVICE: its /readyz answers 200 (tiers: a Raft leader is known, and the
# leader has a session with its parent; hosts: a session and a valid lease;
# anonymous: acl.anonymous_http lists it). The image has no shell, so this curls
# the container's address from the Docker host.
ready() {
	local id
	id=$(container "$1") && [ -n "$id" ] || return 1
	[ "$(docker inspect -f '{{.State.Running}}' "$id")" = true ] || return 1
	curl -fsS -m 2 "http://$(ip "$1"):7500/readyz"
}

# up: make the secrets, start the cluster, wait for the tree, submit
# deploy/examples/job.yaml and wait until its 16 shards run on hosts.
up() {
	./certs.sh
	STRATA_TOKEN=$(cat acl/bootstrap-token)
	export STRATA_TOKEN
	"${compose[@]}" up -d
	local s
	for s in "${services[@]}"; do
		wait_for "$s ready" 60 ready "$s"
	done
	wait_for "3 hosts active under eu-1" 60 hosts_active
	strata job submit /examples/job.yaml --addr global-1:7400
	wait_for "16 shards placed" 60 all_placed
	wait_for "16 shards on hosts" 60 on_hosts
}

# refused DESC WANT CMD...: CMD must fail, and its error must contain WANT.
refused() {
	local desc=$1 want=$2 out; shift 2
	if out=$("$@" 2>&1); then fail "$desc: the call succeeded: $out"; fi
	grep -qF -- "$want" <<<"$out" || fail "$desc: refused, but the error does not say \"$want\": $out"
	echo "ok: $desc: refused ($(tail -1 <<<"$out"))"
}
# as_token TOKEN CMD...: CMD with STRATA_TOKEN=TOKEN (empty: no token).
as_token() { local t=$1; shift; STRATA_TOKEN=$t "$@"; }

# check_refusals: on the running cluster, the Admin API refuses what the token
# does not allow (no token, a token of no tier, a read token used to drain a
# host, delete or submit a job, a revoked token; /metrics without a token), the
# read token reads, and the refused calls change nothing.
check_refusals() {
	local before after before_status after_status read_token code
	before=$(strata shards --addr global-1:7400 -o json)
	before_status=$(strata status --addr global-1:7400)
	refused "no token: status" "requires an ACL token" as_token "" strata status --addr global-1:7400
	refused "no token: drain a host" "requires an ACL token" as_token "" strata host drain eu-1-host-1 --addr global-1:7400
	refused "no token: delete the job" "requires an ACL token" as_token "" strata job delete wordcount --addr global-1:7400
	refused "a token of no tier: status" "unknown or revoked ACL token" as_token "strata_not-a-token-of-this-cluster-at-all" strata status --addr global-1:7400
	read_token=$(strata acl token create check-read --policy read --tree --description "deploy/compose/lib.sh: check_refusals" --addr global-1:7400 | tail -1)
	# strata_read ARGS...: the CLI with the read token.
	strata_read() { as_token "$read_token" strata "$@"; }
	strata_read status --addr global-1:7400 >/dev/null || fail "the read token cannot read the status"
	echo "ok: the read token reads the status of every instance"
	refused "read token: drain a host" "Drain needs a token with policy operate; token \"check-read\" has policy read" strata_read host drain eu-1-host-1 --addr global-1:7400
	refused "read token: delete the job" "DeleteJob needs a token with policy admin" strata_read job delete wordcount --addr global-1:7400
	refused "read token: submit a job" "SubmitJob needs a token with policy admin" strata_read job submit /examples/job.yaml --addr global-1:7400
	code=$(curl -s -o /dev/null -w '%{http_code}' -m 2 "http://$(ip global-1):7500/metrics")
	[ "$code" = 401 ] || fail "/metrics without a token answered $code, want 401"
	curl -fsS -o /dev/null -m 2 -H "Authorization: Bearer $read_token" "http://$(ip global-1):7500/metrics" || fail "/metrics with the read token"
	echo "ok: /metrics: 401 without a token, 200 with the read token"
	after=$(strata shards --addr global-1:7400 -o json)
	[ "$before" = "$after" ] || { diff <(echo "$before") <(echo "$after") >&2 || true; fail "the refused calls changed the shards"; }
	after_status=$(strata status --addr global-1:7400)
	[ "$(grep -c draining <<<"$after_status")" = "$(grep -c draining <<<"$before_status")" ] || fail "a refused drain changed the status: $after_status"
	echo "ok: the refused calls changed nothing (shards, epochs and drains as before)"
	strata acl token revoke check-read --tree --addr global-1:7400 >/dev/null
	refused "a revoked token: status" "unknown or revoked ACL token" strata_read status --addr global-1:7400
}
