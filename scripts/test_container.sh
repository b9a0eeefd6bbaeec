#!/usr/bin/env bash
# Builds deploy/Dockerfile's image and checks it as a client and an orchestrator would: the
# container answers /health once the model is loaded (the readiness probe of
# deploy/kubernetes.yaml), transcribes a golden clip posted to /v1/audio/transcriptions with
# the reference's text, refuses a request without the key, runs as a user other than root,
# and stops at SIGTERM (`docker stop`) with status 0. Needs a Docker engine that can get the
# Dockerfile's base images (rust:1.95-bookworm, debian:bookworm-slim); not part of the test
# suite, whose machines have no engine. Usage: scripts/test_container.sh [PORT]
set -euo pipefail
cd "$(dirname "$0")/.."
port=${1:-8080}
key=container-test-key
image=susurrus:container-test
docker build -f deploy/Dockerfile -t "$image" .
# Host networking, so that the port the entrypoint sets is reached as is.
cid=$(docker run -d --network host "$image" --api-key "$key")
trap 'docker rm -f "$cid" >/dev/null 2>&1 || true' EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
for _ in $(seq 120); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
    sleep 1
done
curl -sf "http://127.0.0.1:$port/health" >/dev/null || { docker logs "$cid"; echo "container: /health never answered" >&2; exit 1; }
clip=tests/fixtures/golden/short_1
want=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(next(x for x in r["runs"] if x["name"]=="beam_5")["text"].strip())' "$clip.json")
got=$(curl -sf -H "Authorization: Bearer $key" -F file=@"$clip.wav" -F model=whisper-1 -F response_format=text \
    "http://127.0.0.1:$port/v1/audio/transcriptions" | sed 's/^ *//; s/ *$//')
[ "$got" = "$want" ] || { echo "container: transcript '$got', reference '$want'" >&2; exit 1; }
status=$(curl -s -o /dev/null -w '%{http_code}' -F file=@"$clip.wav" -F model=whisper-1 "http://127.0.0.1:$port/v1/audio/transcriptions")
[ "$status" = 401 ] || { echo "container: no key answered $status, not 401" >&2; exit 1; }
user=$(docker exec "$cid" id -un)
[ "$user" != root ] || { echo "container: the server runs as root" >&2; exit 1; }
docker stop -t 30 "$cid" >/dev/null
code=$(docker inspect -f '{{.State.ExitCode}}' "$cid")
[ "$code" = 0 ] || { docker logs "$cid"; echo "container: exit status $code after SIGTERM" >&2; exit 1; }
echo "container: /health, the transcript ('$got'), the key, user $user and SIGTERM all as expected"
