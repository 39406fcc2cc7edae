#!/usr/bin/env bash
# Makes the compose cluster's secrets (docs/security.md): the certificates, and the
# ACL bootstrap token in acl/bootstrap-token. Certificates: a CA in tls/ca and,
# for every service, tls/SERVICE/{ca,cert,key}.pem naming it (strata://global/global/
# global-1, strata://region/eu-1/eu-1-1, strata://host/eu-1-host-1) with its DNS name,
# plus tls/operator for the CLI (--tls /tls/operator in a one-shot container). Keeps
# what exists, so it is safe to run again; delete tls/ to start over. The bootstrap
# token is an admin token every tier replica accepts (acl.bootstrap_token_file);
# the CLI sends it with STRATA_TOKEN=$(cat acl/bootstrap-token). Delete acl/ and
# restart the tier replicas to replace it. tls/ and acl/ are in .gitignore.
#
#   deploy/compose/certs.sh            # with the strata:dev image (make image)
#   STRATA=bin/strata deploy/compose/certs.sh
#
# The containers run as uid 65532, so the keys and the token are made readable by
# all (0644): a demo on one machine. In production each key and token file is
# readable by its daemon only.
set -euo pipefail
cd "$(dirname "$0")"
image="${STRATA_IMAGE:-strata:dev}"
mkdir -p tls
if [ -n "${STRATA:-}" ]; then
	strata() { "$STRATA" "$@"; }
	root=tls
else
	strata() { docker run --rm --user "$(id -u):$(id -g)" -v "$PWD/tls:/tls" "$image" "$@"; }
	root=/tls
fi
[ -f tls/ca/ca-key.pem ] || strata tls ca --out "$root/ca" --name "Strata compose CA"
cert() { # DIR FLAGS...
	local dir=$1; shift
	[ -f "tls/$dir/cert.pem" ] || strata tls cert --ca "$root/ca" --out "$root/$dir" "$@"
}
for i in 1 2 3; do
	cert "global-$i" --role global --id "global-$i" --dns "global-$i"
	cert "eu-1-$i" --role region --instance eu-1 --id "eu-1-$i" --dns "eu-1-$i"
	cert "host-$i" --role host --id "eu-1-host-$i" --dns "host-$i"
done
cert operator --role operator --id admin
chmod 0755 tls tls/*/
chmod 0644 tls/*/*.pem
chmod 0700 tls/ca
chmod 0600 tls/ca/ca-key.pem
# 32 random bytes, URL-safe base64 without padding: the form 'strata acl token
# create' makes (strata_ and 43 characters).
mkdir -p acl
if [ ! -f acl/bootstrap-token ]; then
	secret="strata_$(head -c 32 /dev/urandom | base64 -w0 | tr '+/' '-_' | tr -d '=')"
	(umask 077 && printf '%s\n' "$secret" >acl/bootstrap-token.tmp)
	mv acl/bootstrap-token.tmp acl/bootstrap-token
fi
chmod 0755 acl
chmod 0644 acl/bootstrap-token
echo "certificates in $PWD/tls, the ACL bootstrap token in $PWD/acl/bootstrap-token"
