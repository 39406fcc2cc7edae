#!/usr/bin/env bash
# Makes the Secrets the manifests mount (docs/security.md, deploy/README.md
# "Kubernetes"), as deploy/compose/certs.sh does for compose:
#   strata-global-tls        ca.pem and, per pod strata-global-N, N.cert.pem/N.key.pem
#                            (strata://global/global/strata-global-N)
#   strata-region-eu-1-tls   the same for strata-region-eu-1-N (strata://region/eu-1/...)
#   strata-host-tls          ca.pem and NODE.cert.pem/NODE.key.pem per node
#                            (strata://host/NODE): name every node that runs a host
#   strata-acl               bootstrap-token: the ACL bootstrap token (admin)
# and an operator certificate for the CLI in deploy/k8s/secrets/operator. The CA and
# everything issued are kept in deploy/k8s/secrets (in .gitignore; reused on the next run: add a node
# by running again with it; delete the directory to start over). Keep that
# directory private: it holds the CA key.
#
#   deploy/k8s/secrets.sh node-a node-b node-c > secrets.yaml   # STRATA=strata (a binary)
#   kubectl apply -f secrets.yaml && kubectl apply -k deploy/k8s
#
# Replicas' certificates name their stable DNS names (what peers and children dial)
# and the API Service (what the CLI dials).
set -euo pipefail
strata="${STRATA:-strata}"
dir="${STRATA_SECRETS_DIR:-$(dirname "$0")/secrets}"
ns="${STRATA_NAMESPACE:-strata}"
[ $# -gt 0 ] || { echo "usage: $0 NODE... (the nodes that run a host agent)" >&2; exit 2; }
mkdir -p "$dir"
[ -f "$dir/ca/ca-key.pem" ] || "$strata" tls ca --out "$dir/ca" --name "Strata CA ($ns)" >&2
cert() { # OUT FLAGS...
	local out=$1; shift
	[ -f "$out/cert.pem" ] || "$strata" tls cert --ca "$dir/ca" --out "$out" "$@" >&2
}
for i in 0 1 2; do
	p="strata-global-$i"
	cert "$dir/$p" --role global --id "$p" --dns "$p.strata-global.$ns.svc.cluster.local" \
		--dns "strata-global-api.$ns.svc" --dns "strata-global-api.$ns.svc.cluster.local"
	p="strata-region-eu-1-$i"
	cert "$dir/$p" --role region --instance eu-1 --id "$p" --dns "$p.strata-region-eu-1.$ns.svc.cluster.local" \
		--dns "strata-region-eu-1-api.$ns.svc" --dns "strata-region-eu-1-api.$ns.svc.cluster.local"
done
for n in "$@"; do cert "$dir/host-$n" --role host --id "$n"; done
cert "$dir/operator" --role operator --id admin
if [ ! -f "$dir/bootstrap-token" ]; then
	(umask 077 && printf 'strata_%s\n' "$(head -c 32 /dev/urandom | base64 -w0 | tr '+/' '-_' | tr -d '=')" >"$dir/bootstrap-token")
fi

b64() { base64 -w0 <"$1"; }
# secret NAME KEY=FILE...
secret() {
	local name=$1 kv; shift
	printf -- '---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: %s\n  namespace: %s\n  labels: {app.kubernetes.io/part-of: strata}\ntype: Opaque\ndata:\n' "$name" "$ns"
	for kv in "$@"; do printf '  %s: %s\n' "${kv%%=*}" "$(b64 "${kv#*=}")"; done
}
tier_secret() { # NAME PODPREFIX
	local args=("ca.pem=$dir/ca/ca.pem") i
	for i in 0 1 2; do args+=("$2-$i.cert.pem=$dir/$2-$i/cert.pem" "$2-$i.key.pem=$dir/$2-$i/key.pem"); done
	secret "$1" "${args[@]}"
}
tier_secret strata-global-tls strata-global
tier_secret strata-region-eu-1-tls strata-region-eu-1
args=("ca.pem=$dir/ca/ca.pem")
for n in "$@"; do args+=("$n.cert.pem=$dir/host-$n/cert.pem" "$n.key.pem=$dir/host-$n/key.pem"); done
secret strata-host-tls "${args[@]}"
secret strata-acl "bootstrap-token=$dir/bootstrap-token"
echo "secrets for namespace $ns on stdout; CA, certificates and token in $dir (the CLI: --tls $dir/operator, STRATA_TOKEN=\$(cat $dir/bootstrap-token))" >&2
